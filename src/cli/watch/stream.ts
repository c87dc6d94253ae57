// The shell of `opencomms watch`: the store's subscription wakes it whenever any process changed the
// state (no polling loop of its own); it reads what the pure diff needs (the state, the history
// tails of the channels that changed, and the record of any envelope that left live state, each
// log read once per wake-up) and hands out the lines.
import type { Envelope, State } from '../../protocol/schema.ts';
import type { Store, Subscription } from '../../store/index.ts';
import { leaseMs } from '../../runtime/lease.ts';
import { LEASE_RENEWALS_PER_LEASE } from '../../runtime/limits.ts';
import { diff, emptySeen, leaseLines, type Seen, type WatchLine } from './diff.ts';

/** Newest history-log envelopes read per changed channel: they catch mail that was sent and went
 *  terminal between two wake-ups (never seen live); a burst larger than this is still found,
 *  because it was seen live before it vanished and the read reaches back that much further. */
export const WATCH_LOG_TAIL = 50;
/** How far back a vanished envelope is looked for when the first read of its log missed it: it
 *  left live state in the mutation that woke us, so it is among the newest lines unless a
 *  larger burst of mail never seen live followed it. */
export const WATCH_FIND_SCAN = 10_000;

export interface StreamOptions {
  /** Only this channel's lines (a normalised name). */
  channel?: string;
  now?: () => number;
  log: (line: string) => void;
  onLines(lines: WatchLine[]): void;
  /** Called at the start and on every wake-up, lines or not, with what that look read: the
   *  inspector (src/inspect/) follows the same looks as the lines, so it sees what watch sees. */
  onLook?(look: Look): void;
}

/** One look at the store: the state, the history-log envelopes read with it, and the lines it gave
 *  (every channel's; `--channel` filters only `onLines`). */
export interface Look {
  state: Readonly<State>;
  logged: readonly Envelope[];
  lines: readonly WatchLine[];
  now: number;
}

const activeChannels = (s: Readonly<State>) => Object.values(s.channels).filter((c) => c.lifecycle === 'active');

async function tails(store: Store, ids: Iterable<string>): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for (const id of ids) out.push(...(await store.history(id, WATCH_LOG_TAIL)));
  return out;
}

/** The envelopes of live state that are gone from `next`, by channel id. */
function vanished(prev: Readonly<State>, next: Readonly<State>): Map<string, Set<string>> {
  const gone = new Map<string, Set<string>>();
  for (const [id, e] of Object.entries(prev.messages)) {
    if (next.messages[id]) continue;
    const ids = gone.get(e.channel_id);
    if (ids) ids.add(id);
    else gone.set(e.channel_id, new Set([id]));
  }
  return gone;
}

/** What one wake-up reads from the history logs: each log once, its newest WATCH_LOG_TAIL
 *  envelopes plus as many as vanished from it (a burst of 3,000 is one read, not 3,000 scans); a
 *  second, deeper read only for a log where that first one missed a vanished envelope. */
async function logged(store: Store, changed: ReadonlySet<string>, gone: Map<string, Set<string>>): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for (const id of new Set([...changed, ...gone.keys()])) {
    const wanted = gone.get(id) ?? new Set<string>();
    const first = await store.history(id, WATCH_LOG_TAIL + wanted.size);
    out.push(...first);
    for (const e of first) wanted.delete(e.message_id);
    if (wanted.size) out.push(...(await store.history(id, WATCH_FIND_SCAN)).filter((e) => wanted.has(e.message_id)));
  }
  return out;
}

/** Channels whose record changed (a send, a hand-over, a join, …): their log tail is read. */
function changedChannels(prev: Readonly<State>, next: Readonly<State>): Set<string> {
  const before = new Map(Object.values(prev.channels).map((c) => [c.id, JSON.stringify(c)]));
  return new Set(
    activeChannels(next)
      .filter((c) => before.get(c.id) !== JSON.stringify(c))
      .map((c) => c.id),
  );
}

/** The lease lines' shell: a snapshot of the leases at each wake-up and every renewal period (a
 *  lease runs out with no change to the state); null for a store without leases. The first
 *  snapshot counts as reported, as the state does. */
async function leaseLook(store: Store, now: () => number, emit: (lines: WatchLine[]) => void) {
  const leases = store.leases;
  if (!leases) return null;
  let seen = leaseLines(new Map(), await leases.snapshot(), now()).seen;
  return async () => {
    const r = leaseLines(seen, await leases.snapshot(), now());
    seen = r.seen;
    if (r.lines.length) emit(r.lines);
  };
}

export async function streamChanges(store: Store, opts: StreamOptions): Promise<Subscription> {
  const now = opts.now ?? Date.now;
  let prev = await store.read(); // a copy: the live state changes in place
  let revision = await store.revision();
  // Everything that exists now counts as reported: watch shows what happens from here on.
  const all = new Set(activeChannels(prev).map((c) => c.id));
  const first = await tails(store, all);
  let seen: Seen = diff(emptySeen(), prev, first, all, now(), true).seen;
  opts.onLook?.({ state: prev, logged: first, lines: [], now: now() });
  const leases = await leaseLook(store, now, opts.onLines);

  const onChange = async () => {
    // The same revision is the same state: no copy, and only the clock can move recipients.
    const now_ = await store.revision();
    const next = now_ === revision ? prev : await store.read();
    revision = now_;
    const read = next === prev ? new Set<string>() : changedChannels(prev, next);
    const logs = next === prev ? [] : await logged(store, read, vanished(prev, next));
    // An unchanged state still moves recipients on time alone (a cooldown ends): the store's
    // periodic rescan lands here too, and only recipient lines can come out of it.
    const at = now();
    const r = diff(seen, next, logs, read, at);
    seen = r.seen;
    prev = next;
    opts.onLook?.({ state: next, logged: logs, lines: r.lines, now: at });
    const lines = opts.channel ? r.lines.filter((l) => l.kind === 'process' || l.channel === opts.channel) : r.lines;
    if (lines.length) opts.onLines(lines);
    await leases?.();
  };
  const w = await store.subscribe(onChange, opts.log);
  if (!leases) return w;
  // Between wake-ups, one lease snapshot per renewal period: as often as a process renews.
  let looking = Promise.resolve();
  const timer = setInterval(
    () => {
      looking = looking.then(leases).catch((e: unknown) => opts.log(`lease snapshot failed: ${(e as Error).message}`));
    },
    Math.floor(leaseMs() / LEASE_RENEWALS_PER_LEASE),
  );
  timer.unref();
  return {
    close: async () => {
      clearInterval(timer);
      await looking;
      await w.close();
    },
  };
}
