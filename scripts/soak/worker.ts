// One soak process (bundled by the harness, so a restart costs no TypeScript loader):
//   writer <project> <records> <name> <inc> <seed> <paceMin-paceMax>: a pull member that sends
//     targeted messages, broadcasts and replies, and pulls its own mail, recording each accepted
//     send and each pull durably right after the call returns. Stdin `quiet` stops sending (it
//     answers `quiet`); `finish` pulls until nothing is left and exits.
//   owner <project> <records> <name> <inc> <seed> <latencyMs>: a push member's owner process (a
//     Runtime delivering on change, with a DeliveryDriver) whose driver records every prompt it
//     accepts before `deliver` resolves, then takes up to <latencyMs> like a host would. Stdin
//     `finish` closes the runtime and exits.
//   checker <project> <records>: reads the state through a fresh store until stdin says `finish`;
//     every read must load and validate.
// Every line the harness waits for goes to stdout; diagnostics go to stderr.
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RefusalError } from '../../src/protocol/result.ts';
import { parseState } from '../../src/protocol/schema.ts';
import { Runtime, type RuntimeOptions } from '../../src/runtime/runtime.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { PgStore } from '../../src/store/postgres/store.ts';
import { forwardLoopback } from '../../test/netns/net.ts';
import { DurableLog, type CheckRecord, type PromptRecord, type WriterRecord } from './records.ts';
import { CHANNELS, MEMBERS, SOAK_COMPACT_BYTES, SOAK_PG, contentToken, rng, type PgTarget, type Rng } from './plan.ts';

const [mode, project, records, name, incArg, seedArg, tuning] = process.argv.slice(2);
if (!mode || !project || !records) throw new Error('usage: worker <writer|owner|checker> <project> <records> ...');
const inc = Number(incArg ?? 0);
const random = rng(Number(seedArg ?? 1));
const log = (line: string) => process.stderr.write(`[${name ?? mode}#${inc}] ${line}\n`);
const compactBytes = process.env[SOAK_COMPACT_BYTES] ? Number(process.env[SOAK_COMPACT_BYTES]) : undefined;
const pgTarget = process.env[SOAK_PG] ? (JSON.parse(process.env[SOAK_PG]) as PgTarget) : null;
if (pgTarget?.forward)
  await forwardLoopback(Number(new URL(pgTarget.url).port), pgTarget.forward.host, pgTarget.forward.port);
const openRuntime = (dir: string, opts?: RuntimeOptions) =>
  new Runtime(
    pgTarget ? new PgStore({ url: pgTarget.url, key: pgTarget.key }) : new FileStore(dir, { compactBytes }),
    opts,
  );

/** Stdin commands from the harness, one per line, heard from the first moment (a command may
 *  arrive while the runtime is still starting). */
const heard = new Set<string>();
const waiting = new Map<string, () => void>();
createInterface({ input: process.stdin }).on('line', (l) => {
  const cmd = l.trim();
  heard.add(cmd);
  waiting.get(cmd)?.();
});
const next = (want: string) =>
  new Promise<void>((resolve) => (heard.has(want) ? resolve() : waiting.set(want, resolve)));

const between = (r: Rng, [lo, hi]: [number, number]) => lo + Math.floor(r() * (hi - lo + 1));
const range = (s: string | undefined, dflt: [number, number]): [number, number] => {
  const m = /^(\d+)-(\d+)$/.exec(s ?? '');
  return m ? [Number(m[1]), Number(m[2])] : dflt;
};

interface Received {
  id: string;
  channel: string;
  sender: string;
}

async function writer(sid: string) {
  const rt = openRuntime(project!, { log });
  await rt.start(); // the start-up sweep every MCP server runs
  const out = new DurableLog(join(records!, `${sid}.jsonl`));
  const pace = range(tuning, [50, 250]);
  const others = MEMBERS.filter((m) => m !== sid);
  const received: Received[] = [];
  let seq = 0;
  let quiet = false;
  void next('quiet').then(() => (quiet = true));
  const finishing = next('finish');
  process.stdout.write('ready\n');

  const pull = async () => {
    const s = ++seq;
    const r = await rt.run({ op: 'pull', sid, args: { limit: 100 } });
    const at = Date.now();
    if (!r.ok) {
      out.append({
        kind: 'refused',
        inc,
        seq: s,
        at,
        channel: '',
        reason: String((r.data as { reason?: string })?.reason),
      } satisfies WriterRecord);
      return { got: 0, remaining: 1 };
    }
    const data = r.data as {
      message_ids: string[];
      remaining: number;
      messages: Array<{ channel: string; message_id: string; framed: string }>;
    };
    out.append({ kind: 'pulled', inc, seq: s, at, ids: data.message_ids } satisfies WriterRecord);
    for (const m of data.messages) {
      const sender = /written by peer session (\S+) on channel/.exec(m.framed)?.[1];
      if (sender) received.push({ id: m.message_id, channel: m.channel, sender });
    }
    received.splice(0, Math.max(0, received.length - 50));
    return { got: data.message_ids.length, remaining: data.remaining };
  };

  const send = async () => {
    const s = ++seq;
    const roll = random();
    const parent = roll < 0.2 && received.length ? received[Math.floor(random() * received.length)]! : null;
    const channel = parent?.channel ?? CHANNELS[Math.floor(random() * CHANNELS.length)]!;
    const broadcast = !parent && roll > 0.75;
    const args = {
      channel,
      content: `${contentToken(sid, inc, s)} ${random().toString(36).slice(2)}`,
      type: parent ? 'review_response' : random() < 0.5 ? 'review_request' : 'manual',
      ...(parent
        ? { reply_to: parent.id, to: parent.sender }
        : broadcast
          ? { broadcast: true }
          : { to: others[Math.floor(random() * others.length)] }),
    };
    const r = await rt.run({ op: 'send', sid, args });
    const at = Date.now();
    if (r.ok) {
      const ids = (r.data as { message_ids: string[] }).message_ids;
      out.append({
        kind: 'sent',
        inc,
        seq: s,
        at,
        channel,
        ids,
        broadcast,
        reply_to: parent?.id ?? null,
      } satisfies WriterRecord);
    } else
      out.append({
        kind: 'refused',
        inc,
        seq: s,
        at,
        channel,
        reason: String((r.data as { reason?: string })?.reason),
      } satisfies WriterRecord);
  };

  while (!quiet) {
    if (random() < 0.2) await pull();
    else await send();
    await sleep(between(random, pace));
  }
  process.stdout.write('quiet\n');
  await finishing;
  // Nobody sends any more: read everything left, then go.
  for (let idle = 0; idle < 3; ) {
    const { got, remaining } = await pull();
    idle = got === 0 && remaining === 0 ? idle + 1 : 0;
    if (got === 0) await sleep(50);
  }
  out.close();
  await rt.close();
  process.exit(0);
}

async function owner(rid: string) {
  const out = new DurableLog(join(records!, `${rid}.prompts.jsonl`));
  const latency = Number(tuning ?? 40);
  const rt = openRuntime(project!, {
    deliverOnChange: true,
    log,
    driver: {
      method: 'push',
      owns: (r) => r === rid,
      deliver: async (r, text, ids, redelivery) => {
        const framed = ids.every((id) => text.includes(`| id: ${id} |`));
        out.append({ inc, pid: process.pid, rid: r, at: Date.now(), ids, redelivery, framed } satisfies PromptRecord);
        // A host takes a while to accept a prompt: this is the window between drain and commit.
        await sleep(Math.floor(random() * latency));
      },
    },
  });
  await rt.start();
  process.stdout.write('ready\n');
  await next('finish');
  await rt.close();
  out.close();
  process.exit(0);
}

/** What a read answers while the PostgreSQL server is down or restarting. */
const OUTAGE_REASONS = new Set(['state_unreadable', 'state_busy']);

async function checker() {
  const out = new DurableLog(join(records!, 'checker.jsonl'));
  let reads = 0;
  let done = false;
  void next('finish').then(() => (done = true));
  const seenCorrupt = new Set<string>();
  const seenFenced = new Set<string>();
  process.stdout.write('ready\n');
  while (!done) {
    // A fresh store each time: its own load path, no cache shared with an earlier read.
    const rt = openRuntime(project!, { log });
    try {
      const state = await rt.read();
      const valid = parseState(structuredClone(state));
      if (!valid.ok)
        out.append({ kind: 'failure', at: Date.now(), cause: `invalid: ${valid.cause}` } satisfies CheckRecord);
      // A corrupt file is recovered by the load itself (backup + fresh state): the error it
      // records is the evidence.
      for (const e of state.errors) {
        const seen = `${e.at}:${e.message}`;
        if (e.reason === 'state_corrupt' && !seenCorrupt.has(seen)) {
          seenCorrupt.add(seen);
          out.append({ kind: 'failure', at: Date.now(), cause: `corrupt: ${e.message}` } satisfies CheckRecord);
        }
        if (e.reason === 'hold_lost' && !seenFenced.has(seen)) {
          seenFenced.add(seen);
          out.append({ kind: 'fenced', at: e.at, message: e.message } satisfies CheckRecord);
        }
      }
    } catch (e) {
      const reason = e instanceof RefusalError ? e.refusal.data?.reason : undefined;
      // A server restarting answers a read with a stable refusal: recorded, not a failed load.
      if (pgTarget && reason && OUTAGE_REASONS.has(reason))
        out.append({ kind: 'refused', at: Date.now(), reason } satisfies CheckRecord);
      else
        out.append({ kind: 'failure', at: Date.now(), cause: `threw: ${(e as Error).message}` } satisfies CheckRecord);
    } finally {
      await rt.close();
    }
    reads++;
    // Each read of the PostgreSQL store is a cold load on a new connection: fewer of them.
    await sleep(pgTarget ? 100 : 20);
  }
  out.append({ kind: 'tally', at: Date.now(), reads } satisfies CheckRecord);
  out.close();
  process.exit(0);
}

if (mode === 'writer') await writer(name!);
else if (mode === 'owner') await owner(name!);
else if (mode === 'checker') await checker();
else throw new Error(`unknown mode ${mode}`);
