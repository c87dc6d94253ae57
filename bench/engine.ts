// Engine and store figures, in-process and across processes: a send beside the write floors of
// the same run, flat in history and in backlog, writers in parallel, and the wake of an owner.
import { spawn } from 'node:child_process';
import { appendFileSync, readFileSync, statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { newCorrelationId, newMessageId } from '../src/protocol/ids.ts';
import type { Envelope } from '../src/protocol/schema.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { appendHistory, FileStore, resolvePaths, writeAtomic, type Durability } from '../src/store/index.ts';
import {
  WARM_CHANNELS,
  caller,
  ceiling,
  emit,
  emitRatio,
  message,
  now,
  round,
  setupChannels,
  stats,
  withProject,
} from './lib.ts';

/** Enough channels that no channel passes its 1000-per-minute rate limit during a figure. */
const CHANNELS = 3;
/** One pull per this many sends keeps the live queue at a steady size. */
const PULL_EVERY = 20;
const N = 1000;
/** Sends before any timing: V8 tiers the hot path up over the first few hundred calls, and a
 *  figure taken during that (the first project of the run) measured up to 2x its steady state. */
const WARM = 500;
/** Compactions the catch-up figure waits for (one per ~700 sends), and the channels its sends
 *  rotate over to stay under their rate limits meanwhile. */
const COMPACTIONS = 5;
const SPREAD = 12;
/** The pull figure's rounds (100 sends, then one pull of them) after PULL_WARM untimed, over
 *  enough channels that none passes its 1000-a-minute rate limit. */
const PULL_ROUNDS = 40;
const PULL_WARM = 8;
const PULL_CHANNELS = 24;

const open = (dir: string, durability: Durability = 'default') => new Runtime(new FileStore(dir, { durability }));

type SendArgs = (i: number) => { channel: string; broadcast?: boolean };

/** The i-th send, timed; every PULL_EVERY sends the reader pulls (untimed). */
const sender =
  (rt: Runtime, tag: string, args: SendArgs = (i) => ({ channel: `bench-${i % CHANNELS}` })) =>
  async (i: number): Promise<number> => {
    const t = now();
    const r = await rt.run({ op: 'send', sid: 'a', args: { content: `${tag} ${message(i)}`, ...args(i) } });
    const ms = now() - t;
    if (!r.ok) throw new Error(`send refused: ${r.message}`);
    if (i % PULL_EVERY === PULL_EVERY - 1) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
    return ms;
  };

async function timedSends(rt: Runtime, n: number, tag: string, args?: SendArgs): Promise<number[]> {
  const send = sender(rt, tag, args);
  const samples: number[] = [];
  for (let i = 0; i < n; i++) samples.push(await send(i));
  return samples;
}

/** Two projects' sends in turns, each first in every other pair: whatever the machine does
 *  meanwhile falls on both alike. Measured one after the other, minutes apart, the ratio of the
 *  same two figures moved 0.56–1.37 between runs of the same code. */
async function interleaved(
  a: (i: number) => Promise<number>,
  b: (i: number) => Promise<number>,
  n: number,
): Promise<[number[], number[]]> {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 2) {
      ys.push(await b(i));
      xs.push(await a(i));
    } else {
      xs.push(await a(i));
      ys.push(await b(i));
    }
  }
  return [xs, ys];
}

const envelope = (
  channelId: string,
  i: number,
  t0: number,
  status: 'delivered' | 'pending',
  recipient: string,
): Envelope => ({
  message_id: newMessageId(),
  channel_id: channelId,
  sender_session_id: 'a',
  sender_role: 'A',
  recipient_session_id: recipient,
  recipient_role: 'R',
  timestamp: t0 + i,
  message_type: 'manual',
  content: message(i),
  reply_to: null,
  hop_count: 0,
  correlation_id: newCorrelationId(),
  root_message_id: null,
  delivery_status: status,
  delivered_at: status === 'delivered' ? t0 + i + 1 : null,
  attempts: status === 'delivered' ? 1 : 0,
  delivery_method: status === 'delivered' ? 'pull' : null,
  in_flight_by: null,
  in_flight_at: null,
  transitions:
    status === 'delivered'
      ? [
          ['SEND', 'pending', t0 + i],
          ['PULL', 'delivered', t0 + i + 1],
        ]
      : [['SEND', 'pending', t0 + i]],
});

/** 10,000 pending envelopes on `bench-0` for `recipient`, written in one mutation. */
async function pendingFor(rt: Runtime, recipient: string) {
  const ch = (await rt.read()).channels['bench-0']!;
  const t0 = Date.now();
  await rt.store.mutate((d) => {
    const q = (d.queues[recipient] ??= []);
    for (let i = 0; i < 10_000; i++) {
      const e = envelope(ch.id, i, t0, 'pending', recipient);
      d.messages[e.message_id] = e;
      q.push(e.message_id);
    }
    return { changed: true, result: null };
  });
}

/** The median of `fn` over `n` runs. */
async function floorOf(n: number, fn: (i: number) => unknown): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await fn(i);
    xs.push(now() - t);
  }
  return stats(xs).p50;
}

export async function engineBench() {
  // A send on a small steady state, and the two write floors of the same run: the atomic rewrite
  // of state.json a send used to cost (temp file, fsync, rename), and one appended line of the
  // journal's size (what a send costs now, I/O only).
  const empty = await withProject(async (dir) => {
    const rt = open(dir);
    await setupChannels(rt, dir, CHANNELS);
    await timedSends(rt, WARM, 'warm');
    const s = stats(await timedSends(rt, N, 'empty'));
    const paths = resolvePaths(dir);
    const stateBytes = readFileSync(paths.state, 'utf8');
    const journal = statSync(join(paths.journal, `${JSON.parse(stateBytes).journal_id}.jsonl`), {
      throwIfNoEntry: false,
    });
    const lineBytes = 'x'.repeat(journal ? Math.round(journal.size / Math.max(1, N)) : 1500);
    const atomic = await floorOf(N, () =>
      writeAtomic(join(dir, 'floor.json'), stateBytes, { tmpPrefix: '.floor', durable: true }),
    );
    const append = await floorOf(N, () => appendFileSync(join(dir, 'floor.jsonl'), `${lineBytes}\n`));
    await rt.close();
    return { s, atomic, append, stateBytes: stateBytes.length, lineBytes: lineBytes.length };
  });
  emit('engine_send', { unit: 'ms', ...empty.s });
  emitRatio('engine_send_p50_over_atomic_write_floor', empty.s.p50, empty.atomic, '<= 1.5', {
    floor_is: `temp + fsync + rename of the state.json bytes (${empty.stateBytes} B): the write a send used to need`,
  });
  emitRatio('engine_send_p50_over_append_floor', empty.s.p50, empty.append, 'reported', {
    floor_is: `one appended line of the journal's mean line size (${empty.lineBytes} B), no fsync: a send's own I/O now`,
  });

  const durable = await withProject(async (dir) => {
    const rt = open(dir, 'durable');
    await setupChannels(rt, dir, CHANNELS);
    await timedSends(rt, WARM, 'warm');
    const s = stats(await timedSends(rt, N, 'durable'));
    await rt.close();
    return s;
  });
  emit('engine_send_durable', {
    unit: 'ms',
    ...durable,
    note: 'OPENCOMMS_DURABILITY=durable: the journal line fsynced',
  });

  // Flat in history: 100k delivered envelopes in the channel's history log, against an empty
  // project in the same turns.
  const history = await withProject((plainDir) =>
    withProject(async (dir) => {
      const plain = open(plainDir);
      const rt = open(dir);
      await setupChannels(plain, plainDir, CHANNELS);
      await setupChannels(rt, dir, CHANNELS);
      const ch = (await rt.read()).channels['bench-0']!;
      const t0 = Date.now() - 200_000;
      for (let k = 0; k < 10; k++)
        appendHistory(
          resolvePaths(dir),
          Array.from({ length: 10_000 }, (_, i) => envelope(ch.id, k * 10_000 + i, t0, 'delivered', 'r')),
        );
      await interleaved(sender(plain, 'warm'), sender(rt, 'warm'), WARM);
      const [e, h] = await interleaved(sender(plain, 'empty'), sender(rt, 'history'), N);
      await plain.close();
      await rt.close();
      return { s: stats(h), empty: stats(e) };
    }),
  );
  emit('engine_send_history_100k', { unit: 'ms', ...history.s, empty_in_turns: history.empty });
  emitRatio('engine_send_p50_history_100k_over_empty', history.s.p50, history.empty.p50, '<= 1.2', {
    floor_is: 'an empty project, its sends in turns with these',
  });

  // Flat in backlog: 10,000 pending for an offline push member (no process owns it), and every
  // timed send goes to it too. The broadcast reaches two recipients: an empty project of the same
  // shape, its sends in turns with these, is the floor.
  const withOffline = async (rt: Runtime, dir: string) => {
    await setupChannels(rt, dir, CHANNELS);
    for (let i = 0; i < CHANNELS; i++)
      await rt.run({
        op: 'join',
        caller: caller(dir, 'off', 'push'),
        args: { channel: `bench-${i}`, role: 'Offline', role_prompt: 'away' },
      });
  };
  const backlog = await withProject((plainDir) =>
    withProject(async (dir) => {
      const plain = open(plainDir);
      const rt = open(dir);
      await withOffline(plain, plainDir);
      await withOffline(rt, dir);
      await pendingFor(rt, 'off');
      const to = (i: number) => ({ channel: `bench-${i % CHANNELS}`, broadcast: true });
      await interleaved(sender(plain, 'warm', to), sender(rt, 'warm', to), WARM);
      const [e, b] = await interleaved(sender(plain, 'empty', to), sender(rt, 'backlog', to), N);
      const pending = (await rt.read()).queues.off?.length ?? 0;
      await plain.close();
      await rt.close();
      return { s: stats(b), empty: stats(e), pending };
    }),
  );
  emit('engine_send_backlog_10k', {
    unit: 'ms',
    ...backlog.s,
    offline_member_pending: backlog.pending,
    empty_in_turns: backlog.empty,
  });
  emitRatio('engine_send_p50_backlog_10k_over_empty', backlog.s.p50, backlog.empty.p50, '<= 1.2', {
    floor_is: 'an empty project of the same shape, its sends in turns with these',
  });

  // Another store on the same project, up to date after every send, with 10,000 pending: its
  // read right after a compaction, beside its ordinary read of one new line.
  await withProject(async (dir) => {
    const rt = open(dir);
    await setupChannels(rt, dir, SPREAD);
    await pendingFor(rt, 'r');
    const other = open(dir);
    await other.peek(); // the live state: a copy of 10,000 envelopes would cost more than the read
    const state = resolvePaths(dir).state;
    const across: number[] = [];
    const plain: number[] = [];
    for (let i = 0; across.length < COMPACTIONS; i++) {
      const ino = statSync(state).ino;
      const r = await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${i % SPREAD}`, content: message(i) } });
      if (!r.ok) throw new Error(`send refused: ${r.message}`);
      const t = now();
      await other.peek();
      (statSync(state).ino === ino ? plain : across).push(now() - t);
    }
    emit('engine_catch_up_across_compaction_10k_pending', {
      unit: 'ms',
      ...stats(across),
      ordinary_line: stats(plain),
      state_bytes: statSync(state).size,
      what: "another store's first read after a compaction (it follows the journal's seal instead of reading state.json)",
    });
    await other.close();
    await rt.close();
  });

  // In process, what the MCP pull of 100 is made of: another store's catch-up of the writer's
  // 100 sends, then the pull itself (drain, commit, history append, framing), each timed alone.
  await withProject(async (dir) => {
    const a = open(dir);
    const b = open(dir);
    for (let i = 0; i < PULL_CHANNELS; i++) {
      await a.run({
        op: 'create',
        caller: caller(dir, 'a', 'push'),
        args: { channel: `solo${i}`, role: 'A', role_prompt: 'send', rate_limit: 1000 },
      });
      await b.run({
        op: 'join',
        caller: caller(dir, 'r', 'pull'),
        args: { channel: `solo${i}`, role: 'R', role_prompt: 'read' },
      });
    }
    const catchUp: number[] = [];
    const pulls: number[] = [];
    for (let k = 0; k < PULL_WARM + PULL_ROUNDS; k++) {
      const channel = `solo${k % PULL_CHANNELS}`;
      for (let i = 0; i < 100; i++) {
        const r = await a.run({ op: 'send', sid: 'a', args: { channel, content: `${message(i)} ${k}` } });
        if (!r.ok) throw new Error(`send refused: ${r.message}`);
      }
      let t = now();
      await b.peek();
      const c = now() - t;
      t = now();
      const r = await b.run({ op: 'pull', sid: 'r', args: { channel, limit: 100 } });
      const p = now() - t;
      if (!r.ok || (r.data as { messages: unknown[] }).messages.length !== 100) throw new Error(`pull: ${r.message}`);
      if (k >= PULL_WARM) {
        catchUp.push(c);
        pulls.push(p);
      }
    }
    emit('engine_pull_100', {
      unit: 'ms',
      ...stats(pulls),
      what: 'one pull of 100 in process, the store already caught up',
    });
    emit('engine_catch_up_100_lines', {
      unit: 'ms',
      ...stats(catchUp),
      what: "another store's catch-up of 100 sends (their journal lines parsed, applied, validated)",
    });
    await a.close();
    await b.close();
  });

  await withProject(async (dir) => {
    // Each figure beside the same four processes on four projects of their own (`unshared`): no
    // lock, journal or state in common, the most four processes reach on this machine whatever
    // a store does.
    const one = await contended(dir, 1);
    const four = await contended(dir, 4);
    const fourApart = await contended(dir, 4, 0, true);
    emitRatio('engine_4_processes_over_1', four.rate, one.rate, 'reported (retired target >= 1.5: beyond 2 cores)', {
      unit: 'sends/s aggregate',
      lost: four.lost + one.lost + fourApart.lost,
      ceiling: ceiling(one.cores),
      unshared: round(fourApart.rate / one.rate),
    });
    // The same after each process has sent WARM_SENDS: V8 compiles this code over its first
    // ~3,000 calls, and four cold processes pay that four times on two cores.
    const oneWarm = await contended(dir, 1, WARM_SENDS);
    const fourWarm = await contended(dir, 4, WARM_SENDS);
    const fourWarmApart = await contended(dir, 4, WARM_SENDS, true);
    emitRatio('engine_4_processes_over_1_warm', fourWarm.rate, oneWarm.rate, 'reported', {
      unit: 'sends/s aggregate',
      lost: fourWarm.lost + oneWarm.lost + fourWarmApart.lost,
      ceiling: ceiling(oneWarm.cores),
      unshared: round(fourWarmApart.rate / oneWarm.rate),
      warm_up: `${WARM_SENDS} sends per process before the clock`,
    });
  });
  await withProject(async (dir) => wake(dir));
}

/** Sends per process before the warm 4-process figure (see `contended`). */
const WARM_SENDS = 3000;

const workers = {
  contend: join(import.meta.dirname, 'worker.ts'),
  owner: join(import.meta.dirname, '..', 'test', 'helpers', 'runtime-worker.ts'),
};

function child(args: string[]) {
  const proc = spawn(process.execPath, ['--import', 'tsx', workers[args[0] as keyof typeof workers], ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
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

/** `count` processes, each sending to (and pulling for) its own channel, all on one project, or
 *  (`unshared`) each on a project of its own, under `dir`; with `warm`, each first sends that
 *  many on channels of its own (not timed). */
async function contended(
  dir: string,
  count: number,
  warm = 0,
  unshared = false,
): Promise<{ rate: number; lost: number; cores: number }> {
  const PER = 400;
  const tag = (w: number) => `${warm ? 'warm' : 'cold'}${unshared ? '-apart' : ''}${count}x${w}`;
  const projectOf = (w: number) => (unshared ? join(dir, tag(w)) : dir);
  const runtimes = new Map<string, Runtime>();
  const runtimeOf = (w: number) => {
    const project = projectOf(w);
    let rt = runtimes.get(project);
    if (!rt) runtimes.set(project, (rt = open(project)));
    return rt;
  };
  const member = async (w: number, channel: string, sender: string, reader: string) => {
    const rt = runtimeOf(w);
    await rt.run({
      op: 'create',
      caller: caller(projectOf(w), sender, 'push'),
      args: { channel, role: 'A', role_prompt: 'send', rate_limit: 1000 },
    });
    await rt.run({
      op: 'join',
      caller: caller(projectOf(w), reader, 'pull'),
      args: { channel, role: 'R', role_prompt: 'read' },
    });
  };
  for (let w = 0; w < count; w++) {
    await member(w, `w${tag(w)}`, `a${tag(w)}`, `r${tag(w)}`);
    if (warm)
      for (let k = 0; k < WARM_CHANNELS; k++) await member(w, `w${tag(w)}-warm${k}`, `a${tag(w)}`, `r${tag(w)}-warm`);
  }
  const barrier = join(dir, `go-${tag(0)}`);
  const sync = `${barrier}-sync`;
  const kids = Array.from({ length: count }, (_, w) =>
    child([
      'contend',
      projectOf(w),
      `a${tag(w)}`,
      `r${tag(w)}`,
      `w${tag(w)}`,
      String(PER),
      barrier,
      ...(warm ? [String(warm), sync] : []),
    ]),
  );
  if (warm) {
    await Promise.all(kids.map((k) => k.waitFor((l) => l === 'warm')));
    await writeFile(sync, '');
  }
  await Promise.all(kids.map((k) => k.waitFor((l) => l === 'ready')));
  const t = now();
  await writeFile(barrier, '');
  const done = await Promise.all(kids.map((k) => k.waitFor((l) => l.startsWith('{'))));
  const elapsed = now() - t;
  const results = done.map((l) => JSON.parse(l) as { sent: number; pulled: number; cpu_ms: number });
  const cores = round(results.reduce((a, r) => a + r.cpu_ms, 0) / elapsed);
  let pending = 0;
  for (let w = 0; w < count; w++) pending += ((await runtimeOf(w).read()).queues[`r${tag(w)}`] ?? []).length;
  const sent = results.reduce((a, r) => a + r.sent, 0);
  const pulled = results.reduce((a, r) => a + r.pulled, 0);
  const name = `engine_throughput_${count}_process${count > 1 ? 'es' : ''}${unshared ? '_unshared' : ''}${warm ? '_warm' : ''}`;
  emit(name, {
    unit: 'sends/s',
    value: Math.round(sent / (elapsed / 1000)),
    sent,
    pulled,
    still_pending: pending,
    lost: sent - pulled - pending,
    cores_busy: cores,
  });
  for (const rt of runtimes.values()) await rt.close();
  return { rate: sent / (elapsed / 1000), lost: sent - pulled - pending, cores };
}

/** Process A sends; process B owns the recipients and reports when the batch is in flight. */
async function wake(dir: string) {
  const rt = open(dir);
  const R = 25;
  await rt.run({
    op: 'create',
    caller: caller(dir, 'a', 'push'),
    args: { channel: 'wake', role: 'A', role_prompt: 'send', rate_limit: 1000, max_members: 32 },
  });
  for (let i = 0; i < R; i++)
    await rt.run({
      op: 'join',
      caller: caller(dir, `b${i}`, 'push'),
      args: { channel: 'wake', role: `B${i}`, role_prompt: 'receive' },
    });
  const owner = child(['owner', dir, [...Array(R).keys()].map((i) => `b${i}`).join(',')]);
  await owner.waitFor((l) => l === 'ready');
  const samples: number[] = [];
  // Of 100 wakes the p99 is the slowest one: a single stall of the machine (12–29 ms, with the
  // same code, between runs minutes apart) decided the figure. Of 400 it is the fourth slowest
  // (6–7 ms in those runs; the slowest, 17–20 ms, is in `max`).
  const WAKES = 400;
  for (let i = 0; i < WAKES; i++) {
    const r = await rt.run({ op: 'send', sid: 'a', args: { channel: 'wake', content: `wake ${i}`, to: `b${i % R}` } });
    const sentAt = performance.timeOrigin + now();
    const id = (r.data as { message_ids: string[] }).message_ids[0]!;
    const line = await owner.waitFor((l) => l.includes(id));
    samples.push(JSON.parse(line).at - sentAt);
    // Each recipient gets one message per R × 50 ms = 1.25 s, past its 1 s push cooldown.
    await new Promise((res) => setTimeout(res, 50));
  }
  owner.proc.kill('SIGTERM');
  const s = stats(samples);
  emit('wake_cross_process', {
    unit: 'ms',
    ...s,
    what: 'send returns in A → batch in_flight in owner B',
    target: 'p99 <= 20',
  });
  await rt.close();
  return round(s.p99);
}
