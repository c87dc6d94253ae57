// Wakes (protocol.md "Wakes", "Cost ledger"): each member's wake line (machines/wake.ts), the wake
// chain a message inherits from its sender's wake, the notice a held member's next hand-over starts
// with, and the ledger of what each member's turns were handed. A wake is a drain on a route that
// starts a turn (push, spawn_push); a read (pull, a hook's boundary) starts none.
import {
  recentStarts,
  step,
  wakePersistence,
  type WakeEvent,
  type WakeHold,
  type WakeRecord,
} from '../../machines/index.ts';
import { raw } from '../protocol/draft.ts';
import { LOOP_WAKES, REFLEX_MS, USAGE_BUCKET_MS, USAGE_KEEP_MS, WAKE_BUDGET_WINDOW_MS } from '../protocol/limits.ts';
import type { Channel, Counters, Envelope, State, WakeLine } from '../protocol/schema.ts';

const QUIET: WakeRecord = {
  at: null,
  chain: 0,
  base: 0,
  starts: [],
  held_by: null,
  held_since: null,
  held_newest: null,
  ended_by: null,
  ended_since: null,
};

/** The member's wake line as the machine's record (a member never woken has the quiet one). */
export const wakeLine = (ch: Channel, rid: string): WakeRecord =>
  (raw(ch).wakes?.[rid] as WakeRecord | undefined) ?? QUIET;

/** The wake chain of a message `sid` sends now: one more than the wake it answers, 0 when it
 *  answers none (no wake, or the wake is older than REFLEX_MS). The operator's: 0. */
export function replyChain(ch: Channel, sid: string, now: number): number {
  const w = raw(ch).wakes?.[sid];
  return w?.at != null && now - w.at <= REFLEX_MS ? w.chain + 1 : 0;
}

/** The lowest wake chain and the newest time of `rid`'s pending mail on `ch`. */
function pendingChain(state: State, ch: Channel, rid: string): { chain: number; newest: number } {
  const messages = raw(state.messages);
  let chain = Number.POSITIVE_INFINITY;
  let newest = 0;
  for (const id of raw(state.queues)[rid] ?? []) {
    const e = messages[id];
    if (!e || e.channel_id !== ch.id || e.delivery_status !== 'pending') continue;
    chain = Math.min(chain, e.wake_chain ?? 0);
    newest = Math.max(newest, e.timestamp);
  }
  return { chain: Number.isFinite(chain) ? chain : 0, newest };
}

/** Wakes the channel's members were given within the budget window. */
function channelStarts(ch: Channel, now: number): number {
  let n = 0;
  for (const w of Object.values(raw(ch).wakes ?? {})) n += recentStarts(w.starts, now, WAKE_BUDGET_WINDOW_MS).length;
  return n;
}

/** Whether two records of a line differ (a held line's repeated WAKE runs its assign and changes
 *  nothing: it must write nothing either). */
const differs = (a: WakeRecord, b: WakeRecord) =>
  a.at !== b.at ||
  a.chain !== b.chain ||
  a.base !== b.base ||
  a.starts.length !== b.starts.length ||
  a.starts[0] !== b.starts[0] ||
  a.held_by !== b.held_by ||
  a.held_since !== b.held_since ||
  a.held_newest !== b.held_newest ||
  a.ended_by !== b.ended_by ||
  a.ended_since !== b.ended_since;

function stepWake(
  ch: Channel,
  rid: string,
  event: WakeEvent,
): { before: WakeRecord; after: WakeRecord; changed: boolean } {
  const before = wakeLine(ch, rid);
  const r = step(wakePersistence, before, event);
  const changed = r.changed && differs(before, r.record);
  if (changed) (ch.wakes ??= {})[rid] = r.record as WakeLine;
  return { before, after: r.record, changed };
}

export interface WakeDecision {
  /** Why the wake is held, or null: the turn may start. */
  hold: WakeHold | null;
  /** The line before this wake: held, when this hand-over ends a hold (its notice is due). */
  before: WakeRecord;
  /** When a held budget frees a wake again, or null. */
  retry_at: number | null;
  /** Whether the line or the ledger was written. */
  changed: boolean;
}

/** Asks `rid`'s wake line whether a turn may start for its pending mail on `ch` now; records the
 *  wake or the hold, and counts it in the ledger. */
export function decideWake(state: State, ch: Channel, rid: string, route: string, now: number): WakeDecision {
  const { chain, newest } = pendingChain(state, ch, rid);
  const b = raw(ch).budgets;
  const member_budget = b.max_wakes_per_member ?? null;
  const channel_budget = b.max_wakes_per_channel ?? null;
  const { before, after, changed } = stepWake(ch, rid, {
    type: 'WAKE',
    now,
    chain,
    newest,
    member_budget,
    channel_budget,
    channel_starts: channelStarts(ch, now),
    window_ms: WAKE_BUDGET_WINDOW_MS,
    keep: Math.max(member_budget ?? 0, channel_budget ?? 0),
  });
  const hold = after.held_by;
  if (hold === null) {
    count(ch, rid, now, { wakes: 1, route });
    return { hold, before, retry_at: null, changed: true };
  }
  const more = after.held_newest !== before.held_newest;
  if (more) count(ch, rid, now, { held: 1 });
  return {
    hold,
    before,
    retry_at: hold === 'wake_budget' ? budgetFrees(ch, rid, now) : null,
    changed: changed || more,
  };
}

/** When the oldest start that holds the budget leaves the window. */
export function budgetFrees(ch: Channel, rid: string, now: number): number {
  const own = recentStarts(wakeLine(ch, rid).starts, now, WAKE_BUDGET_WINDOW_MS);
  const all = Object.values(raw(ch).wakes ?? {}).flatMap((w) => recentStarts(w.starts, now, WAKE_BUDGET_WINDOW_MS));
  const b = raw(ch).budgets;
  const memberFull = b.max_wakes_per_member != null && own.length >= b.max_wakes_per_member;
  const oldest = Math.min(...(memberFull ? own : all));
  return Number.isFinite(oldest) ? oldest + WAKE_BUDGET_WINDOW_MS : now + WAKE_BUDGET_WINDOW_MS;
}

/** The notice a wake's batch carries when that wake ended a hold (a host that frames the batch
 *  again from its envelopes, as the Codex wake does, adds it from here), or null. */
export function endedNotice(ch: Channel, rid: string, wokenAt: number, handed: readonly Envelope[]): string | null {
  const line = wakeLine(ch, rid);
  return line.ended_by !== null && line.at === wokenAt
    ? holdNotice(ch, { held_by: line.ended_by, held_since: line.ended_since }, handed)
    : null;
}

/** Held mail was handed over at a turn OpenComms did not start: the hold ends (its notice went
 *  with the mail). */
export const settleHold = (ch: Channel, rid: string, now: number) => stepWake(ch, rid, { type: 'HANDED', now });

/** The operator lets the held wakes of `rids` go: the loop count of every member of the channel
 *  starts again at the highest chain their held mail carries, so the loop it was (whoever is in
 *  it) gets LOOP_WAKES wakes again. Returns the members that were held. */
export function releaseHolds(state: State, ch: Channel, rids: readonly string[], now: number): string[] {
  const held = rids.filter((rid) => wakeLine(ch, rid).held_by !== null);
  if (!held.length) return [];
  const chain = Math.max(...held.map((rid) => pendingChain(state, ch, rid).chain));
  for (const m of raw(ch).members) stepWake(ch, m.session_id, { type: 'RELEASE', now, chain });
  return held;
}

const time = (at: number) => `${new Date(at).toISOString().slice(11, 16)} UTC`;

/** The line of OpenComms' own that starts a held member's next hand-over: what was held, by what,
 *  why, and how it ends. Never inside a peer frame. */
export function holdNotice(
  ch: Channel,
  line: Pick<WakeRecord, 'held_by' | 'held_since'>,
  handed: readonly Envelope[],
): string {
  const roles = [...new Set(handed.map((e) => e.sender_role))].join(', ');
  const what = `${handed.length} message(s)${roles ? ` from ${roles}` : ''}`;
  const since = line.held_since === null ? '' : ` since ${time(line.held_since)}`;
  const name = raw(ch).name;
  if (line.held_by === 'loop')
    return `(OpenComms: ${what}, held${since} by the loop guard: ${LOOP_WAKES} turns in a row answered a wake within ${REFLEX_MS / 1000} s, so OpenComms stopped starting turns for this mail; it was not lost and is all here. Reply only if it changes the work: an acknowledgement starts the loop again. The operator can release the hold: opencomms release ${name}.)`;
  const b = raw(ch).budgets;
  return `(OpenComms: ${what}, held${since} by the wake budget of channel "${name}" (${b.max_wakes_per_member ?? 'no limit'} wakes per member, ${b.max_wakes_per_channel ?? 'no limit'} per channel, per hour); it was not lost and is all here. OpenComms starts turns again as the hour frees them. The operator can change the budget: opencomms channel budget ${name}.)`;
}

/** What one hand-over adds to a member's ledger. */
export interface Charge {
  wakes?: number;
  route?: string;
  held?: number;
  messages?: number;
  size?: number;
}

const zero = (): Counters => ({ wakes: 0, routes: {}, held: 0, messages: 0, size: 0 });

function add(c: Counters, d: Charge) {
  if (d.wakes) c.wakes += d.wakes;
  if (d.route && (d.wakes || d.messages)) {
    const routes = (c.routes ??= {});
    routes[d.route] = (routes[d.route] ?? 0) + (d.wakes || 1);
  }
  if (d.held) c.held += d.held;
  if (d.messages) c.messages += d.messages;
  if (d.size) c.size += d.size;
}

/** Counts `d` in `rid`'s ledger on `ch`: its totals and the bucket of `now`, in place, so a
 *  write records the counters it changed, not the ledger. A new bucket sweeps the ones older than
 *  USAGE_KEEP_MS (their totals stay). */
export function count(ch: Channel, rid: string, now: number, d: Charge) {
  const ledgers = (ch.usage ??= {});
  const u = (ledgers[rid] ??= { total: zero(), buckets: {} });
  add(u.total, d);
  const key = String(now - (now % USAGE_BUCKET_MS));
  let bucket = u.buckets[key];
  if (!bucket) {
    for (const k of Object.keys(u.buckets)) if (now - Number(k) > USAGE_KEEP_MS) delete u.buckets[k];
    bucket = u.buckets[key] = zero();
  }
  add(bucket, d);
}
