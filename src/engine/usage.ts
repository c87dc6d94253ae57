// The cost report (operator.md "Wakes and their cost"): per live channel and per member,
// what OpenComms started and handed over in the last hour, the last day and since the channel
// began — wakes (by route), wakes held, messages, shown characters and a token estimate — each
// member's wake hold and its use of the wake budgets. Pure: derived from the channel's cost ledger
// (`usage`), its wake lines (`wakes`), its holds and budgets, and `now`. The CLI's `usage`,
// `status` and `members`, the console and `watch` all read it from here.
import {
  CHARS_PER_TOKEN_ESTIMATE,
  DEFAULT_WAKES_PER_CHANNEL,
  DEFAULT_WAKES_PER_MEMBER,
  USAGE_BUCKET_MS,
  USAGE_KEEP_MS,
  WAKE_BUDGET_WINDOW_MS,
} from '../protocol/limits.ts';
import { ok, type Refusal, type ToolResult } from '../protocol/result.ts';
import type { Channel, State } from '../protocol/schema.ts';
import { mailIndex, type MailIndex } from './deliveries.ts';
import { liveChannel } from './lookup.ts';

/** Why a member's wakes are held: the loop guard, or a spent wake budget. */
export type WakeHold = 'loop' | 'wake_budget';
export const WAKE_HOLDS: readonly WakeHold[] = ['loop', 'wake_budget'];

/** How the operator reads a hold. */
export const WAKE_HOLD_LABEL: Record<WakeHold, string> = { loop: 'loop guard', wake_budget: 'wake budget' };

/** One ledger entry: a bucket's, or the total's. */
export interface Counters {
  /** Turns OpenComms started. */
  wakes: number;
  /** Per route (`<host>/<method>`, or `pull` for reads that started no turn). */
  routes: Record<string, number>;
  /** Wakes held (once per new held mail). */
  held: number;
  /** Messages handed to the model. */
  messages: number;
  /** Shown characters of the framed text handed to the model. */
  size: number;
}

/** Counters with the token estimate beside the size. */
export interface CostView extends Counters {
  /** ceil(size / CHARS_PER_TOKEN_ESTIMATE): an estimate, never a count. */
  tokens_estimate: number;
}

export interface Windows {
  hour: CostView;
  day: CostView;
  /** Since the channel began. */
  total: CostView;
}

/** A member's wake line as the report reads it (every field tolerated missing). */
export interface WakeLineView {
  /** The wake machine's state (machines/wake.ts): held, woken (a wake of OpenComms is being
   *  answered), or quiet. */
  state: 'quiet' | 'woken' | 'held';
  held_by: WakeHold | null;
  held_since: number | null;
  /** When OpenComms last woke it (null: quiet or held). */
  woken_at: number | null;
  chain: number;
}

export interface BudgetUse {
  /** Wakes started within the rolling window. */
  used: number;
  /** The budget per window; null = none. */
  budget: number | null;
  /** When the oldest start that fills the budget leaves the window (null: not spent). */
  next_free_at: number | null;
}

export interface MemberUsage {
  session_id: string;
  /** null: no longer a member (the ledger keeps what it cost). */
  role: string | null;
  host: string | null;
  member: boolean;
  /** `pending`: its mail waiting on this channel (null: read from the sessions index, which
   *  keeps no counts). */
  hold: WakeLineView & { pending: number | null };
  wake_budget: BudgetUse;
  usage: Windows;
}

export interface ChannelUsage {
  channel_id: string;
  name: string;
  created_at: number;
  usage: Windows;
  wake_budget: BudgetUse & { window_ms: number };
  members: MemberUsage[];
}

export interface UsageReport {
  now: number;
  bucket_ms: number;
  /** What each window sums: whole buckets, so a window covers up to one bucket more than it names. */
  windows: { hour: { ms: number; since: number }; day: { ms: number; since: number } };
  token_estimate: { chars_per_token: number; rule: string; note: string };
  channels: ChannelUsage[];
}

const HOUR_MS = 3_600_000;

// ---- typed accessors: the fields of the wake guard, tolerated missing ----------------------------

const num = (v: unknown, d = 0) => (typeof v === 'number' && Number.isFinite(v) ? v : d);
const numOrNull = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const isHold = (v: unknown): v is WakeHold => v === 'loop' || v === 'wake_budget';

const zero = (): Counters => ({ wakes: 0, routes: {}, held: 0, messages: 0, size: 0 });

function countersOf(raw: unknown): Counters {
  const c = obj(raw);
  const routes: Record<string, number> = {};
  for (const [k, v] of Object.entries(obj(c.routes))) if (num(v)) routes[k] = num(v);
  return { wakes: num(c.wakes), routes, held: num(c.held), messages: num(c.messages), size: num(c.size) };
}

function add(into: Counters, c: Counters): Counters {
  into.wakes += c.wakes;
  into.held += c.held;
  into.messages += c.messages;
  into.size += c.size;
  for (const [k, v] of Object.entries(c.routes)) into.routes[k] = (into.routes[k] ?? 0) + v;
  return into;
}

/** The token estimate's rule, applied: ceil(size / CHARS_PER_TOKEN_ESTIMATE). */
export const tokensEstimate = (size: number) => Math.ceil(size / CHARS_PER_TOKEN_ESTIMATE);
const view = (c: Counters): CostView => ({ ...c, tokens_estimate: tokensEstimate(c.size) });

/** A member's ledger: its total and its buckets (bucket start in ms, as a string key). */
function ledgerOf(ch: Channel, rid: string): { total: Counters; buckets: Array<[number, Counters]> } {
  const entry = obj(obj((ch as { usage?: unknown }).usage)[rid]);
  const buckets = Object.entries(obj(entry.buckets))
    .map(([k, v]) => [Number(k), countersOf(v)] as [number, Counters])
    .filter(([k]) => Number.isFinite(k));
  return { total: countersOf(entry.total), buckets };
}

/** The start of the first bucket a window of `ms` ending at `now` sums. */
export const windowSince = (now: number, ms: number) => Math.floor((now - ms) / USAGE_BUCKET_MS) * USAGE_BUCKET_MS;

/** The buckets that overlap (now - ms, now], summed. */
function windowSum(buckets: Array<[number, Counters]>, now: number, ms: number): Counters {
  const since = windowSince(now, ms);
  const sum = zero();
  for (const [start, c] of buckets) if (start >= since && start <= now) add(sum, c);
  return sum;
}

function windowsOf(ledger: ReturnType<typeof ledgerOf>, now: number) {
  return {
    hour: windowSum(ledger.buckets, now, HOUR_MS),
    day: windowSum(ledger.buckets, now, USAGE_KEEP_MS),
    total: add(zero(), ledger.total),
  };
}

const viewWindows = (w: { hour: Counters; day: Counters; total: Counters }): Windows => ({
  hour: view(w.hour),
  day: view(w.day),
  total: view(w.total),
});

/** A member's wake line (`channel.wakes[rid]`): the wake machine's record is the hold's truth
 *  (a read that ends a hold clears it and `channel.holds[rid]` together; a release leaves both to
 *  the next wake); a member with no line yet is held when `channel.holds[rid]` names a wake hold. */
export function wakeLineOf(ch: Channel, rid: string): WakeLineView & { starts: number[] } {
  const lines = obj((ch as { wakes?: unknown }).wakes);
  const w = obj(lines[rid]);
  const hold = ch.holds?.[rid];
  const heldBy = rid in lines ? (isHold(w.held_by) ? w.held_by : null) : isHold(hold) ? hold : null;
  const wokenAt = numOrNull(w.at);
  return {
    state: heldBy ? 'held' : wokenAt !== null ? 'woken' : 'quiet',
    held_by: heldBy,
    held_since: heldBy ? numOrNull(w.held_since) : null,
    woken_at: wokenAt,
    chain: num(w.chain),
    starts: Array.isArray(w.starts) ? w.starts.filter((t): t is number => typeof t === 'number') : [],
  };
}

/** A wake budget as the channel sets it: a number, null (none), or the default when not set. */
function budgetOf(ch: Channel, key: 'max_wakes_per_member' | 'max_wakes_per_channel'): number | null {
  const b = obj(ch.budgets);
  if (!(key in b)) return key === 'max_wakes_per_member' ? DEFAULT_WAKES_PER_MEMBER : DEFAULT_WAKES_PER_CHANNEL;
  return numOrNull(b[key]);
}

/** Starts within the rolling window, against a budget; when spent, when a slot frees. */
function budgetUse(starts: readonly number[], budget: number | null, now: number): BudgetUse {
  const inWindow = starts.filter((t) => t > now - WAKE_BUDGET_WINDOW_MS && t <= now).sort((a, b) => a - b);
  const spent = budget !== null && inWindow.length >= budget;
  const oldest = spent ? inWindow[inWindow.length - budget] : undefined;
  return {
    used: inWindow.length,
    budget,
    next_free_at: oldest === undefined ? null : oldest + WAKE_BUDGET_WINDOW_MS,
  };
}

/** What the report reads: the channels, and the mail when it has it (a whole state); the
 *  sessions index (SessionsState) has the channels only. */
export type UsageSource = { readonly channels: Readonly<Record<string, Channel>> } & Partial<
  Pick<Readonly<State>, 'messages' | 'queues'>
>;

const indexOf = (src: UsageSource): MailIndex | null =>
  src.messages && src.queues ? mailIndex(src as Readonly<State>) : null;

/** One live channel's report. `index`: the state's mail index (null: no pending counts). */
export function channelUsage(ch: Channel, now: number, index: MailIndex | null): ChannelUsage {
  const rids = [
    ...ch.members.map((m) => m.session_id),
    ...Object.keys(obj((ch as { usage?: unknown }).usage)).filter(
      (rid) => !ch.members.some((m) => m.session_id === rid),
    ),
  ];
  const sums = { hour: zero(), day: zero(), total: zero() };
  const allStarts: number[] = [];
  const members = rids.map((rid): MemberUsage => {
    const m = ch.members.find((x) => x.session_id === rid);
    const w = windowsOf(ledgerOf(ch, rid), now);
    add(sums.hour, w.hour);
    add(sums.day, w.day);
    add(sums.total, w.total);
    const { starts, ...line } = wakeLineOf(ch, rid);
    allStarts.push(...starts);
    return {
      session_id: rid,
      role: m?.role ?? null,
      host: m?.host ?? null,
      member: !!m,
      hold: { ...line, pending: index ? index.count(ch.id, rid).pending : null },
      wake_budget: budgetUse(starts, budgetOf(ch, 'max_wakes_per_member'), now),
      usage: viewWindows(w),
    };
  });
  return {
    channel_id: ch.id,
    name: ch.name,
    created_at: ch.created_at,
    usage: viewWindows(sums),
    wake_budget: {
      ...budgetUse(allStarts, budgetOf(ch, 'max_wakes_per_channel'), now),
      window_ms: WAKE_BUDGET_WINDOW_MS,
    },
    members,
  };
}

/** Every live channel's report, or the one named (null: all). */
export function usageReport(state: UsageSource, now: number, channelName?: string | null): UsageReport {
  const index = indexOf(state);
  const channels = Object.values(state.channels)
    .filter((c) => c.lifecycle === 'active' && (channelName == null || c.name === channelName))
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((c) => channelUsage(c, now, index));
  return {
    now,
    bucket_ms: USAGE_BUCKET_MS,
    windows: {
      hour: { ms: HOUR_MS, since: windowSince(now, HOUR_MS) },
      day: { ms: USAGE_KEEP_MS, since: windowSince(now, USAGE_KEEP_MS) },
    },
    token_estimate: {
      chars_per_token: CHARS_PER_TOKEN_ESTIMATE,
      rule: `ceil(size / ${CHARS_PER_TOKEN_ESTIMATE})`,
      note: 'An estimate from the shown characters handed to the model, not a count of any model’s tokens.',
    },
    channels,
  };
}

/** The `usage` read: every live channel, or the one `args.channel` names (refused when it names
 *  none or a saved one). Reads only, and takes no lock: the shell calls it on a look at the state. */
export function usageResult(
  state: UsageSource,
  args: { channel?: unknown },
  now: number,
): ToolResult<UsageReport> | Refusal {
  const named = args.channel !== undefined && args.channel !== null && args.channel !== '';
  if (!named) {
    const report = usageReport(state, now);
    return ok(`Usage of ${report.channels.length} live channel(s).`, report);
  }
  // The lookup reads the channels only.
  const found = liveChannel(state as Readonly<State>, args.channel);
  if ('refusal' in found) return found.refusal;
  return ok(`Usage of "${found.ch.name}".`, usageReport(state, now, found.ch.name));
}
