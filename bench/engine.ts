// Engine + runtime figures (issue "Engine and delivery runtime"): send latency with and without
// 100k delivered messages of history, the atomic-write floor, throughput with 1 and 4 processes,
// cross-process wake latency, and the state size after the history run.
import { resolvePaths } from '../src/store/index.ts';
import { spawn } from 'node:child_process';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { newMessageId, newCorrelationId } from '../src/protocol/ids.ts';
import type { Envelope } from '../src/protocol/schema.ts';
import { openRuntime, type Runtime } from '../src/runtime/runtime.ts';
import { appendHistory, writeAtomic } from '../src/store/index.ts';
import { caller, emit, now, setupChannels, stats, withProject } from './lib.ts';

/** Enough channels that no channel passes its 1000-per-minute rate limit during a figure. */
const CHANNELS = 3;
/** One pull per this many sends keeps the live queue (and so state.json) at a steady size. */
const PULL_EVERY = 20;

async function timedSends(rt: Runtime, n: number, tag: string): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    const r = await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${i % CHANNELS}`, content: `${tag} ${i}` } });
    samples.push(now() - t);
    if (!r.ok) throw new Error(`send refused: ${r.message}`);
    if (i % PULL_EVERY === PULL_EVERY - 1) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
  }
  return samples;
}

/** 100k delivered envelopes of history, written through the store's own log writer. */
async function fillHistory(rt: Runtime, count: number) {
  const state = await rt.read();
  const ch = state.channels['bench-0']!;
  const t0 = Date.now() - count;
  const batch: Envelope[] = [];
  for (let i = 0; i < count; i++) {
    batch.push({
      message_id: newMessageId(), channel_id: ch.id, sender_session_id: 'a', sender_role: 'A', recipient_session_id: 'r',
      recipient_role: 'R', timestamp: t0 + i, message_type: 'manual', content: `history message ${i} `.padEnd(120, '.'),
      reply_to: null, hop_count: 0, correlation_id: newCorrelationId(), root_message_id: null, delivery_status: 'delivered',
      delivered_at: t0 + i + 1, attempts: 1, delivery_method: 'pull', in_flight_by: null, in_flight_at: null,
      transitions: [['SEND', 'pending', t0 + i], ['PULL', 'delivered', t0 + i + 1]],
    });
    if (batch.length === 10_000) await appendHistory(resolvePaths(rt.store.location), batch.splice(0));
  }
  await appendHistory(resolvePaths(rt.store.location), batch);
}

export async function engineBench() {
  const N = 1000;
  const empty = await withProject(async (dir) => {
    const rt = openRuntime(dir);
    await setupChannels(rt, dir, CHANNELS);
    await timedSends(rt, 100, 'warm');
    const s = stats(await timedSends(rt, N, 'empty'));
    await rt.close();
    return s;
  });
  emit('send_p50_empty', { unit: 'ms', ...empty });

  let floorOut = { p50: 0 };
  const history = await withProject(async (dir) => {
    const rt = openRuntime(dir);
    await setupChannels(rt, dir, CHANNELS);
    const t = now();
    await fillHistory(rt, 100_000);
    emit('history_fill', { unit: 'ms', delivered_in_history: 100_000, took_ms: Math.round(now() - t) });
    await timedSends(rt, 100, 'warm');
    const s = stats(await timedSends(rt, N, 'history'));
    const text = await readFile(resolvePaths(rt.store.location).state, 'utf8');
    const floor: number[] = [];
    const scratch = join(dir, '.opencomms', 'floor.json');
    for (let i = 0; i < N; i++) {
      const t1 = now();
      await writeAtomic(scratch, text, { tmpPrefix: '.floor' });
      floor.push(now() - t1);
    }
    floorOut = stats(floor);
    emit('state_json_bytes_after_history_run', { bytes: (await stat(resolvePaths(rt.store.location).state)).size, history_log_bytes: (await stat(join(resolvePaths(rt.store.location).history, `${(await rt.read()).channels['bench-0']!.id}.jsonl`))).size });
    await rt.close();
    return s;
  });
  emit('send_p50_history_100k', { unit: 'ms', ...history });
  emit('send_history_ratio', { ratio: round(history.p50 / empty.p50), target: '<= 1.2' });
  emit('floor_p50', { unit: 'ms', ...floorOut, what: 'atomic write (temp, fsync, rename) of the same hot-state bytes' });
  emit('send_over_floor', { ratio: round(history.p50 / floorOut.p50), target: '<= 2' });

  await withProject(async (dir) => {
    const rt = openRuntime(dir);
    await setupChannels(rt, dir, CHANNELS);
    let sends = 0;
    const t = now();
    while (now() - t < 3000) {
      await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${sends % CHANNELS}`, content: `tp ${sends}` } });
      sends++;
      if (sends % PULL_EVERY === 0) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
    }
    emit('throughput_1_process', { unit: 'sends/s', value: Math.round(sends / ((now() - t) / 1000)), sends, note: `includes one pull per ${PULL_EVERY} sends`, target: '>= 1000' });
    await rt.close();
  });

  await withProject(async (dir) => contended(dir));
  await withProject(async (dir) => wake(dir));
}

const round = (x: number) => Math.round(x * 100) / 100;
const workers = { contend: join(import.meta.dirname, 'worker.ts'), owner: join(import.meta.dirname, '..', 'test', 'helpers', 'runtime-worker.ts') };

function child(args: string[]) {
  const proc = spawn(process.execPath, ['--import', 'tsx', workers[args[0] as keyof typeof workers], ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let buf = '';
  let notify = () => {};
  proc.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      notify();
    }
  });
  const waitFor = (pred: (l: string) => boolean) =>
    new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`bench worker timeout: ${lines.join('|')}`)), 120_000);
      const check = () => {
        const hit = lines.find(pred);
        if (hit !== undefined) {
          clearTimeout(t);
          resolve(hit);
        } else notify = check;
      };
      check();
    });
  return { proc, lines, waitFor };
}

/** 4 processes, each sending to (and pulling for) its own channel, all under one lock. */
async function contended(dir: string) {
  const rt = openRuntime(dir);
  const PER = 400;
  for (let w = 0; w < 4; w++) {
    await rt.run({ op: 'create', caller: caller(dir, `a${w}`, 'push'), args: { channel: `w${w}`, role: 'A', role_prompt: 'send', rate_limit: 1000 } });
    await rt.run({ op: 'join', caller: caller(dir, `r${w}`, 'pull'), args: { channel: `w${w}`, role: 'R', role_prompt: 'read' } });
  }
  const barrier = join(dir, 'go');
  const kids = [0, 1, 2, 3].map((w) => child(['contend', dir, `a${w}`, `r${w}`, `w${w}`, String(PER), barrier]));
  await Promise.all(kids.map((k) => k.waitFor((l) => l === 'ready')));
  const t = now();
  await writeFile(barrier, '');
  const done = await Promise.all(kids.map((k) => k.waitFor((l) => l.startsWith('{'))));
  const elapsed = now() - t;
  const results = done.map((l) => JSON.parse(l) as { sent: number; pulled: number });
  const state = await rt.read();
  let pending = 0;
  for (let w = 0; w < 4; w++) pending += (state.queues[`r${w}`] ?? []).length;
  const sent = results.reduce((a, r) => a + r.sent, 0);
  const pulled = results.reduce((a, r) => a + r.pulled, 0);
  emit('throughput_4_processes', {
    unit: 'sends/s', value: Math.round(sent / (elapsed / 1000)), sent, pulled, still_pending: pending, lost: sent - pulled - pending,
    note: `aggregate; each process pulls its own mail every ${PULL_EVERY} sends`, target: '>= 400, lost = 0',
  });
  await rt.close();
}

/** Process A sends; process B owns the recipients and reports when the batch is in flight. */
async function wake(dir: string) {
  const rt = openRuntime(dir);
  const R = 25;
  await rt.run({ op: 'create', caller: caller(dir, 'a', 'push'), args: { channel: 'wake', role: 'A', role_prompt: 'send', rate_limit: 1000, max_members: 32 } });
  for (let i = 0; i < R; i++) await rt.run({ op: 'join', caller: caller(dir, `b${i}`, 'push'), args: { channel: 'wake', role: `B${i}`, role_prompt: 'receive' } });
  const owner = child(['owner', dir, [...Array(R).keys()].map((i) => `b${i}`).join(',')]);
  await owner.waitFor((l) => l === 'ready');
  const samples: number[] = [];
  const N = 100;
  for (let i = 0; i < N; i++) {
    const r = await rt.run({ op: 'send', sid: 'a', args: { channel: 'wake', content: `wake ${i}`, to: `b${i % R}` } });
    const sentAt = performance.timeOrigin + now();
    const id = (r.data as { message_ids: string[] }).message_ids[0]!;
    const line = await owner.waitFor((l) => l.includes(id));
    samples.push(JSON.parse(line).at - sentAt);
    // Each recipient gets one message per R × 50 ms = 1.25 s, past its 1 s push cooldown.
    await new Promise((res) => setTimeout(res, 50));
  }
  owner.proc.kill('SIGTERM');
  emit('wake_cross_process', { unit: 'ms', ...stats(samples), what: 'send returns in A → batch in_flight in owner B', target: 'p50 <= 10, p99 <= 50' });
  await rt.close();
}
