// Two-phase delivery (protocol.md "The machines", "Drain, commit, requeue, sweep"):
// drain (persisted BEFORE any prompt) → Prompt effect → commit | requeue; sweep after a crash;
// pull = drain + commit in one mutation. Every status change is an envelope machine transition.
import type { Hold, WakeRecord } from '../../machines/index.ts';
import {
  BATCH_SEPARATOR,
  frameEnvelope,
  AnswerRoom,
  joinFrames,
  shownSize,
  splitContent,
  UnsafeHeaderError,
  UNTRUSTED_NOTICE,
} from '../framing.ts';
import { DEFAULT_READ_LIMIT, MAX_BATCH, MAX_PART_SIZE, MAX_PULL_LIMIT } from '../protocol/limits.ts';
import { ok, refuse } from '../protocol/result.ts';
import type { Channel, DeliveryStatus, Envelope, Member, State } from '../protocol/schema.ts';
import { channelById, findMember, memberChannel, recordError } from './lookup.ts';
import { answered, done, refused } from './outcome.ts';
import { enforceRetention, writeBack } from './retention.ts';
import { hasInFlight } from './receipts.ts';
import { staleWindow } from './eligibility.ts';
import { channelStepOps, stepChannel, stepEnvelope, stepRecipient } from './transitions.ts';
import { raw } from '../protocol/draft.ts';
import type { Effect, Env, Held, Outcome } from './types.ts';
import { budgetFrees, count, decideWake, holdNotice, settleHold, wakeLine } from './wakes.ts';

/** Room a hold's notice takes in a hand-over (shownSize units): its longest form, with three
 *  senders' roles and the channel's name, is under this. */
const NOTICE_RESERVE = 600;

/** Mail a wake hold kept waits for the member's next turn, however long: it never ages out. */
const wakeHeld = (ch: Channel, rid: string) => wakeLine(ch, rid).held_by !== null;

/** The recipient line's deadlines (recipient machine `isCooling`): a drain now starts no batch. */
const isCooling = (ch: Channel, rid: string, now: number) =>
  (raw(ch).cooldown_until[rid] ?? 0) > now || (raw(ch).retry_at[rid] ?? 0) > now;

/** A live channel and the recipient's row on it, or why the envelope can never be delivered. */
function placement(state: State, e: Envelope): { ch: Channel; member: Member } | null {
  const ch = channelById(state, e.channel_id);
  if (ch?.lifecycle !== 'active') return null;
  // The member is only read (its stale window): looked up in the plain channel.
  const member = findMember(raw(ch), e.recipient_session_id);
  return member ? { ch, member } : null;
}

/** Whether the channel would refuse a hand-over now (paused, budget), without changing it. */
export function channelHold(ch: Channel, now: number): Hold | null {
  const r = channelStepOps(ch, { type: 'HAND_OVER', now, count: 0 }).refusal;
  return r === null ? null : r.reason === 'channel_paused' ? 'paused' : 'budget';
}

/** Hand-overs the message budget still allows. */
const budgetLeft = (ch: Channel) =>
  ch.budgets.max_delivered_messages === null
    ? Infinity
    : Math.max(0, ch.budgets.max_delivered_messages - ch.delivered_total);

/** The envelopes queued for a recipient (what a drain or pull can settle or hand over). */
function queuedEnvelopes(state: State, rid: string): Envelope[] {
  const out: Envelope[] = [];
  const messages = raw(state.messages);
  for (const id of raw(state.queues)[rid] ?? []) {
    const e = messages[id];
    if (e) out.push(e);
  }
  return out;
}

/** An empty queue is removed rather than kept as `[]`. */
export function setQueue(state: State, rid: string, ids: string[]) {
  if (ids.length) state.queues[rid] = ids;
  else delete state.queues[rid];
}

/** A cheap pre-filter for the envelope machine's `isPastStaleWindow` guard (which decides). */
const mayBeStale = (e: Envelope, w: number | null, now: number) => w !== null && now - e.timestamp > w;

/** Drops dead queue entries and settles envelopes that can no longer be delivered (rejected,
 *  stale). Returns true when anything changed. */
function settleQueue(state: State, rid: string, env: Env): boolean {
  const now = env.now;
  // Read in the plain state; only an envelope that steps is written through the draft.
  const q = raw(state.queues)[rid];
  if (!q) return false;
  const messages = raw(state.messages);
  let changed = false;
  const keep: string[] = [];
  for (const id of q) {
    const e = messages[id];
    if (e?.delivery_status !== 'pending' || e.recipient_session_id !== rid) {
      changed = true;
      continue;
    }
    const at = placement(state, e);
    let status: DeliveryStatus = e.delivery_status;
    if (!at) status = stepEnvelope(state.messages[id]!, { type: 'REJECT', now });
    // Order (protocol.md "The machines"): a paused or budget-held channel keeps its mail pending (it must not age out
    // while held). Only envelopes old enough to be past a window are offered to the machine,
    // so a drain's cost follows the stale ones, not the queue's length.
    else {
      const w = staleWindow(at.member, env.spawnHosts);
      if (mayBeStale(e, w, now) && channelHold(at.ch, now) === null && !wakeHeld(at.ch, rid))
        status = stepEnvelope(state.messages[id]!, { type: 'TICK', now, window_ms: w });
    }
    if (status === 'pending') {
      const parts = e.part ? null : partsOfWhole(state, e, env);
      if (parts) {
        keep.push(...parts);
        changed = true;
      } else keep.push(id);
    } else changed = true;
  }
  if (changed) setQueue(state, rid, keep);
  return changed;
}

/** An envelope queued whole by an OpenComms older than parts, longer than one part: replaced by its
 *  parts (protocol.md "Parts"), new ids in its place, so no route is ever asked to show more than it
 *  can. Null when it fits one part. The length check first: it is the common, cheap answer. */
function partsOfWhole(state: State, e: Envelope, env: Env): string[] | null {
  if (e.content.length <= MAX_PART_SIZE) return null;
  const slices = splitContent(e.content, MAX_PART_SIZE);
  if (slices.length < 2) return null;
  const ids = slices.map((content, i) => {
    const id = env.mint('ocm');
    state.messages[id] = {
      ...e,
      message_id: id,
      content,
      part: { n: i + 1, of: slices.length },
      transitions: [...e.transitions],
    };
    return id;
  });
  delete state.messages[e.message_id];
  return ids;
}

/** The envelope's frame, built once from the envelope as stored (a step changes no header
 *  field), or null: an envelope whose header the framer refuses (only a tampered state holds one)
 *  is rejected with an error instead of stopping the recipient's mail. The error names no field
 *  value: the value is what could not be shown safely. */
function frameOrReject(state: State, e: Envelope, ch: Channel, channelName: string, now: number): string | null {
  try {
    return frameEnvelope(raw(e), channelName);
  } catch (err) {
    if (!(err instanceof UnsafeHeaderError)) throw err;
    const stored = state.messages[e.message_id]!;
    stepEnvelope(stored, { type: 'REJECT', now });
    recordError(state, {
      at: now,
      reason: 'unsafe_header',
      channel_id: ch.id,
      session_id: stored.recipient_session_id,
      message: `An envelope was rejected instead of delivered: ${err.message}. The state file was edited outside OpenComms.`,
    });
    return null;
  }
}

export interface DrainOptions {
  /** A hold the host knows and the file does not: busy, not the owner, ineligible. */
  hold?: Hold | null;
  /** Upper bound on the batch; default MAX_BATCH. */
  max?: number;
  /** Upper bound on the framed batch in shownSize units (framing.ts; never less than its UTF-8
   *  bytes, so a command line's byte budget holds too): what the route's host shows whole
   *  (adapters/route-limits.ts). The longest FIFO prefix that fits is taken. */
  maxSize?: number;
}

const SEPARATOR_SIZE = shownSize(BATCH_SEPARATOR);

/**
 * Drains one push recipient: settles its queue, asks the recipient machine of each channel whether
 * a batch may leave now, and moves up to MAX_BATCH envelopes to in_flight. The Prompt effect runs
 * only after this state is saved, so a crash can never lose a batch that was prompted.
 */
export function drain(state: State, rid: string, env: Env, opts: DrainOptions = {}): Outcome {
  const touched = queuedEnvelopes(state, rid);
  let changed = settleQueue(state, rid, env);
  const effects: Effect[] = [];
  const q = state.queues[rid] ?? [];
  const batch: Envelope[] = [];
  const frames: string[] = [];
  const max = Math.min(opts.max ?? MAX_BATCH, MAX_BATCH);
  const decided = new Map<string, 'delivering' | 'held'>();
  const taken = new Set<string>();
  // Hands-over that end a wake hold start with its notice (wakes.ts holdNotice), within the room.
  const ended = new Map<string, { ch: Channel; line: WakeRecord }>();
  let used = 0;
  for (const id of q) {
    if (batch.length >= max) break;
    const e = state.messages[id]!;
    const { ch, member } = placement(state, e)!;
    let line = decided.get(ch.id);
    if (line === undefined) {
      const inFlight = hasInFlight(state, ch, rid);
      let hold = channelHold(ch, env.now) ?? (member.stale ? 'stale' : null) ?? opts.hold ?? null;
      // Only a turn that would start now asks the wake line (machines/wake.ts): held or cooling
      // mail starts none.
      if (hold === null && !inFlight && !isCooling(ch, rid, env.now)) {
        const wake = decideWake(state, ch, rid, `${member.host}/${member.delivery_mode}`, env.now);
        hold = wake.hold;
        if (wake.changed) changed = true;
        if (wake.retry_at !== null) effects.push({ type: 'ScheduleAt', recipient: rid, at: wake.retry_at });
        if (hold === null && wake.before.held_by !== null) {
          ended.set(ch.id, { ch, line: wake.before });
          used += NOTICE_RESERVE;
        }
      }
      const stepped = stepRecipient(ch, rid, inFlight, { type: 'DRAIN', now: env.now, hold });
      const next = stepped.line;
      if (stepped.changed) changed = true;
      // `delivering` with a batch already out is the machine's in-flight guard (DRAIN is not
      // enabled there): it holds, it never starts a second batch.
      line = next === 'delivering' && !inFlight ? 'delivering' : 'held';
      decided.set(ch.id, line);
      if (next === 'cooling')
        effects.push({
          type: 'ScheduleAt',
          recipient: rid,
          at: Math.max(ch.cooldown_until[rid] ?? 0, ch.retry_at[rid] ?? 0),
        });
    }
    if (line !== 'delivering' || budgetLeft(ch) < 1) continue;
    // Framed once: the frame is checked, sized and joined into the batch as it is.
    const framed = frameOrReject(state, e, ch, ch.name, env.now);
    if (framed === null) {
      taken.add(id);
      continue;
    }
    // Its size as the batch joins it: the separator counted once per frame after the first.
    const size = opts.maxSize === undefined ? 0 : shownSize(framed) + (batch.length ? SEPARATOR_SIZE : 0);
    if (opts.maxSize !== undefined && used + size > opts.maxSize) break;
    stepChannel(ch, { type: 'HAND_OVER', now: env.now, count: 1 });
    if (
      stepEnvelope(e, {
        type: 'DRAIN',
        now: env.now,
        by: env.by,
        // Mail a wake hold kept does not age out at the wake that ends the hold.
        window_ms: ended.has(ch.id) ? null : staleWindow(member, env.spawnHosts),
      }) !== 'in_flight'
    )
      continue;
    used += size;
    (state.delivered_to[id] ??= []).includes(rid) || state.delivered_to[id]!.push(rid);
    batch.push(e);
    frames.push(framed);
    taken.add(id);
  }
  if (taken.size) {
    setQueue(
      state,
      rid,
      q.filter((id) => !taken.has(id)),
    );
    changed = true;
  }
  if (batch.length) {
    const member = placement(state, batch[0]!)!.member;
    const notices = [...ended.values()].map(({ ch, line }) =>
      holdNotice(
        ch,
        line,
        batch.filter((e) => e.channel_id === ch.id),
      ),
    );
    const text = [...notices, joinFrames(frames)].join('\n\n');
    // Each channel's ledger: its messages and the characters of their frames (and its notice).
    const per = new Map<string, { ch: Channel; messages: number; size: number }>();
    batch.forEach((e, i) => {
      let c = per.get(e.channel_id);
      if (!c) per.set(e.channel_id, (c = { ch: placement(state, e)!.ch, messages: 0, size: 0 }));
      c.messages++;
      c.size += frames[i]!.length;
    });
    [...ended.values()].forEach(({ ch }, i) => {
      const c = per.get(ch.id);
      if (c) c.size += notices[i]!.length;
    });
    for (const { ch, messages, size } of per.values()) count(ch, rid, env.now, { messages, size });
    effects.push({
      type: 'Prompt',
      recipient: rid,
      channel_ids: [...new Set(batch.map((e) => e.channel_id))],
      message_ids: batch.map((e) => e.message_id),
      attempts: batch.map((e) => e.attempts),
      text,
      mode: member.delivery_mode,
      redelivery: batch.some((e) => e.attempts > 1),
    });
  }
  const history = enforceRetention(state, env.now, touched);
  return done(
    state,
    ok(batch.length ? `Drained ${batch.length} envelope(s) for ${rid}.` : `Nothing to hand over to ${rid} now.`, {
      message_ids: batch.map((e) => e.message_id),
      remaining: (state.queues[rid] ?? []).length,
    }),
    effects,
    history.length ? { history } : undefined,
    changed || history.length > 0,
  );
}

/** Settles the in-flight batch of one recipient: each id still held under the caller's hold
 *  (`in_flight_by` and the attempt it was handed over at) gets `event`. An id whose envelope is
 *  gone (pruned, purged) or already settled at that attempt (a repeated commit) is skipped; one
 *  that is no longer held so (swept back to its queue, handed over again: a later attempt) is
 *  fenced: the caller lost its hold, and settling it would undo what the sweep or the new holder
 *  decided. Every hand-over (drain, pull) counts an attempt, so the attempt names it. */
function settleBatch(state: State, rid: string, ids: string[], held: Held, settle: (e: Envelope) => void) {
  const settled: Envelope[] = [];
  const fenced: string[] = [];
  ids.forEach((id, i) => {
    const e = state.messages[id];
    if (!e || e.recipient_session_id !== rid) return;
    const sameAttempt = e.attempts === held.attempts[i];
    if (sameAttempt && e.delivery_status !== 'in_flight' && e.delivery_status !== 'pending') return;
    if (e.delivery_status !== 'in_flight' || e.in_flight_by !== held.by || !sameAttempt) {
      fenced.push(id);
      return;
    }
    settle(e);
    settled.push(e);
  });
  const channels = new Set(settled.map((e) => e.channel_id));
  return {
    settled,
    fenced,
    channels: [...channels]
      .map((id) => channelById(state, id))
      .filter((c): c is Channel => !!c && c.lifecycle === 'active'),
  };
}

/** A settle that met envelopes the caller no longer holds: recorded, so a process that lost its
 *  hold (a partition past its lease, a sweep) is visible, and its effect is not repeated. */
function recordFenced(
  state: State,
  rid: string,
  fenced: string[],
  what: 'commit' | 'requeue',
  held: Held,
  now: number,
) {
  if (!fenced.length) return;
  recordError(state, {
    at: now,
    reason: 'hold_lost',
    session_id: rid,
    message: `A ${what} by ${held.by} was refused for ${fenced.length} envelope(s) it no longer holds (${fenced.join(', ')}): they were swept or handed over again; they are delivered through their current holder or queue.`,
  });
}

/** The answer when every id was fenced: a refusal the caller can act on, with the error recorded. */
const fencedOut = (state: State, fenced: string[]) =>
  done(
    state,
    refuse(
      'hold_lost',
      `None of the ${fenced.length} envelope(s) is held by this process any more (swept or handed over again): do not retry; the mail is delivered through its current holder or queue.`,
      { fenced },
    ),
  );

/** The host accepted the prompt: the batch is delivered (ids pruned or purged meanwhile are skipped). */
export function commitDelivery(
  state: State,
  rid: string,
  ids: string[],
  method: 'push' | 'spawn_push',
  held: Held,
  env: Env,
): Outcome {
  const { settled, fenced, channels } = settleBatch(state, rid, ids, held, (e) =>
    stepEnvelope(e, { type: 'COMMIT', now: env.now, method }),
  );
  recordFenced(state, rid, fenced, 'commit', held, env.now);
  if (!settled.length && fenced.length) return fencedOut(state, fenced);
  const effects: Effect[] = [];
  for (const ch of channels) {
    if (!hasInFlight(state, ch, rid)) stepRecipient(ch, rid, true, { type: 'COMMIT', now: env.now });
    if ((state.queues[rid] ?? []).length)
      effects.push({ type: 'ScheduleAt', recipient: rid, at: ch.cooldown_until[rid] ?? env.now });
  }
  const history = enforceRetention(state, env.now, settled);
  return done(
    state,
    ok(`Committed ${settled.length} envelope(s) for ${rid}.`, { delivered: settled.map((e) => e.message_id), fenced }),
    effects,
    history.length ? { history } : undefined,
    settled.length > 0 || fenced.length > 0 || history.length > 0,
  );
}

/** Puts envelopes back at the front of the recipient's queue in their original (timestamp) order. */
function requeueFront(state: State, rid: string, back: Envelope[], sortAll: boolean) {
  const ids = back.sort((a, b) => a.timestamp - b.timestamp).map((e) => e.message_id);
  const q = [...ids, ...(state.queues[rid] ?? []).filter((id) => !ids.includes(id))];
  if (sortAll) q.sort((a, b) => (state.messages[a]?.timestamp ?? 0) - (state.messages[b]?.timestamp ?? 0));
  setQueue(state, rid, q);
}

/** The prompt threw: FIFO restored, error recorded, one retry after DELIVERY_RETRY_MS; dead
 *  letter once attempts reach MAX_DELIVERY_ATTEMPTS. */
export function requeueDelivery(
  state: State,
  rid: string,
  ids: string[],
  error: string,
  held: Held,
  env: Env,
): Outcome {
  const { settled, fenced, channels } = settleBatch(state, rid, ids, held, (e) =>
    stepEnvelope(e, { type: 'REQUEUE', now: env.now }),
  );
  recordFenced(state, rid, fenced, 'requeue', held, env.now);
  if (!settled.length)
    return fenced.length
      ? fencedOut(state, fenced)
      : answered(state, ok('Nothing in flight to requeue.', { requeued: 0, failed: 0 }));
  const back = settled.filter((e) => e.delivery_status === 'pending');
  const dead = settled.filter((e) => e.delivery_status === 'failed');
  requeueFront(state, rid, back, false);
  const effects: Effect[] = [];
  for (const ch of channels) {
    stepRecipient(ch, rid, true, { type: 'REQUEUE', now: env.now });
    effects.push({ type: 'ScheduleAt', recipient: rid, at: ch.retry_at[rid] ?? env.now });
  }
  const channelId = settled[0]!.channel_id;
  recordError(state, {
    at: env.now,
    reason: 'delivery_failed',
    channel_id: channelId,
    session_id: rid,
    message: `Delivery to session ${rid} failed (${error}); ${back.length} re-queued${dead.length ? `, ${dead.length} dead-lettered after the maximum attempts` : ''}.`,
  });
  const history = enforceRetention(state, env.now, settled);
  return done(
    state,
    ok(`Re-queued ${back.length}, failed ${dead.length}.`, { requeued: back.length, failed: dead.length }),
    effects,
    history.length ? { history } : undefined,
  );
}

/** Releases the sessions owned by processes that are gone: ownerless, they go to the process
 *  that serves them next (its claim) or to the cross-server fallback. Returns how many. */
function releaseOwners(state: State, alive: (by: string) => boolean): number {
  let released = 0;
  for (const ch of Object.values(raw(state.channels))) {
    if (ch.lifecycle !== 'active') continue;
    ch.members.forEach((m, i) => {
      if (m.owner === null || alive(m.owner)) return;
      state.channels[ch.name]!.members[i]!.owner = null;
      released++;
    });
  }
  return released;
}

/** The sweep (at start-up, and when a lease expires): in-flight mail of processes that are gone
 *  goes back to its queue (FIFO by timestamp) or to the dead letter, and their sessions' ownership
 *  is released, in this one mutation. A live process's batch and sessions are left alone. */
export function sweepInFlight(state: State, alive: (by: string) => boolean, env: Env): Outcome {
  const orphans = Object.values(state.messages).filter(
    (e) => e.delivery_status === 'in_flight' && (e.in_flight_by === null || !alive(e.in_flight_by)),
  );
  const released = releaseOwners(state, alive);
  if (!orphans.length)
    return released
      ? done(state, ok(`Released ${released} session(s) of ended processes.`, { requeued: 0, failed: 0, released }))
      : answered(state, ok('Nothing to sweep.', { requeued: 0, failed: 0, released: 0 }));
  const byRecipient = new Map<string, Envelope[]>();
  for (const e of orphans) {
    stepEnvelope(e, { type: 'SWEEP', now: env.now });
    byRecipient.set(e.recipient_session_id, [...(byRecipient.get(e.recipient_session_id) ?? []), e]);
  }
  const wake: string[] = [];
  for (const [rid, list] of byRecipient) {
    requeueFront(
      state,
      rid,
      list.filter((e) => e.delivery_status === 'pending'),
      true,
    );
    for (const cid of new Set(list.map((e) => e.channel_id))) {
      const ch = channelById(state, cid);
      if (ch?.lifecycle === 'active' && !hasInFlight(state, ch, rid))
        stepRecipient(ch, rid, true, { type: 'SWEEP', now: env.now });
    }
    if (state.queues[rid]?.length) wake.push(rid);
  }
  const requeued = orphans.filter((e) => e.delivery_status === 'pending').length;
  const failed = orphans.length - requeued;
  recordError(state, {
    at: env.now,
    reason: 'in_flight_swept',
    message: `Sweep: ${requeued} in-flight envelope(s) of ended processes re-queued${failed ? `, ${failed} dead-lettered` : ''}.`,
  });
  const history = enforceRetention(state, env.now);
  return done(
    state,
    ok(`Swept ${orphans.length} envelope(s).`, { requeued, failed, released }),
    wake.length ? [{ type: 'Wake', recipients: wake }] : [],
    history.length ? { history } : undefined,
  );
}

export interface PullArgs {
  channel?: unknown;
  limit?: unknown;
}

const readLimit = (raw: unknown, def: number, max: number) => {
  const n = typeof raw === 'number' ? Math.floor(raw) : typeof raw === 'string' ? Math.floor(Number(raw)) : NaN;
  return !Number.isFinite(n) || n <= 0 ? def : Math.min(n, max);
};
export { readLimit };

/**
 * An explicit read: drain + commit in ONE mutation, returning the framed texts (no crash window,
 * no replay; the push cooldown never delays it). `method` is `pull` for the tool, `push` for hooks.
 */
/**
 * Reads (drains and commits in one step) the caller's pending mail, FIFO, up to `limit` envelopes
 * and, with `maxSize`, up to what the answer's route shows whole (AnswerRoom). What does not fit
 * stays pending, in order, for the next read.
 */
export function pull(
  state: State,
  sid: string,
  args: PullArgs,
  env: Env,
  method: 'pull' | 'push' = 'pull',
  maxSize?: number,
): Outcome {
  let scope: Channel[];
  if (args.channel !== undefined && args.channel !== null && args.channel !== '') {
    const scoped = memberChannel(state, args.channel, sid);
    if ('refusal' in scoped) return refused(state, scoped.refusal);
    scope = [scoped.ch];
  } else {
    // Read in the plain state: through the change tracker this wrapped every channel, roster and
    // member of the project in a proxy (~0.3 ms with 42 channels), for a read.
    scope = Object.values(raw(state.channels)).filter((c) => c.lifecycle === 'active' && findMember(c, sid));
  }
  if (scope.some((c) => !findMember(c, sid)!.endpoint_capabilities.pull))
    return refused(state, refuse('pull_not_allowed', "This member's capabilities exclude pull. Ask the operator."));
  // A hook's read (push) takes nothing while a batch of this recipient is in flight: the host shows
  // that batch later (a wake it holds until the turn ends, a spawned run), so anything taken now
  // would reach the model before older mail.
  const behind = method === 'push' && scope.some((c) => hasInFlight(state, c, sid));
  const limit = behind ? 0 : readLimit(args.limit, DEFAULT_READ_LIMIT, MAX_PULL_LIMIT);
  const inScope = new Set(scope.map((c) => c.id));
  const touched = queuedEnvelopes(state, sid);
  let changed = settleQueue(state, sid, env);
  // Read in the plain state; an envelope taken is stepped through the draft.
  const plain = raw(state.messages);
  const q = raw(state.queues)[sid] ?? [];
  const out: Envelope[] = [];
  const messages: Array<{ channel: string; message_id: string; framed: string }> = [];
  const taken = new Set<string>();
  const stepped: Envelope[] = [];
  // Per channel, decided once per pull: whether it holds its mail, and how many hand-overs its
  // budget still allows; the channel machine then counts them in one HAND_OVER.
  const allowance = new Map<string, { ch: Channel; left: number; handed: number }>();
  const room = new AnswerRoom(maxSize);
  if (scope.some((c) => wakeHeld(c, sid))) room.reserve(NOTICE_RESERVE);
  const sizes = new Map<string, number>(); // characters handed over per channel, for the ledger
  let full = false; // stopped at the route's size: the rest waits for the next read
  for (const id of q) {
    if (out.length >= limit) break;
    const p = plain[id]!;
    if (!inScope.has(p.channel_id)) continue;
    const { ch, member } = placement(state, p)!;
    let a = allowance.get(ch.id);
    if (!a) allowance.set(ch.id, (a = { ch, left: channelHold(ch, env.now) === null ? budgetLeft(ch) : 0, handed: 0 }));
    if (a.handed >= a.left) continue;
    taken.add(id);
    const name = raw(ch).name;
    const framed = frameOrReject(state, p, ch, name, env.now);
    if (framed === null) continue;
    if (!room.take(framed)) {
      taken.delete(id);
      full = true;
      break;
    }
    // Stepped on a copy that then replaces the envelope in one write (writeBack), or leaves state
    // for the history log without one when it ends terminal: the change tracker records one path,
    // not one per field and per transition appended.
    const e = { ...p, transitions: [...p.transitions] };
    const status = stepEnvelope(e, {
      type: 'PULL',
      now: env.now,
      method,
      window_ms: wakeHeld(ch, sid) ? null : staleWindow(member, env.spawnHosts),
    });
    if (status !== p.delivery_status) stepped.push(e);
    if (status !== 'delivered') continue;
    a.handed++;
    out.push(e);
    messages.push({ channel: name, message_id: id, framed });
    sizes.set(ch.id, (sizes.get(ch.id) ?? 0) + framed.length);
  }
  const notices: string[] = [];
  for (const { ch, handed } of allowance.values()) {
    if (!handed) continue;
    stepChannel(ch, { type: 'HAND_OVER', now: env.now, count: handed });
    const mine = out.filter((e) => e.channel_id === ch.id);
    const line = wakeLine(ch, sid);
    // Held mail read at a turn OpenComms did not start: the hold ends, its notice goes with it.
    if (line.held_by !== null) {
      notices.push(holdNotice(ch, line, mine));
      settleHold(ch, sid, env.now);
      stepRecipient(ch, sid, hasInFlight(state, ch, sid), { type: 'TICK', now: env.now, hold: null });
    }
    count(ch, sid, env.now, { route: 'pull', messages: mine.length, size: sizes.get(ch.id) ?? 0 });
  }
  if (taken.size) {
    setQueue(
      state,
      sid,
      q.filter((id) => !taken.has(id)),
    );
    changed = true;
  }
  const left = writeBack(state, stepped);
  const delivered = raw(state.delivered_to);
  for (const e of out) {
    const id = e.message_id;
    if (!plain[id]) continue; // left for the history log: nobody reads its readers
    const readers = delivered[id];
    if (!readers?.includes(sid)) state.delivered_to[id] = readers ? [...readers, sid] : [sid];
  }
  const rest = (raw(state.queues)[sid] ?? []).filter((id) => inScope.has(plain[id]?.channel_id ?? ''));
  const remaining = rest.length;
  const history = [...left, ...enforceRetention(state, env.now, touched)];
  const got = out.length
    ? `${out.length} message(s); ${remaining} still pending.${full ? ' Call opencomms_pull again for the next: one answer shows only so much whole.' : ''}`
    : remaining
      ? `No message can be handed over now; ${remaining} pending.`
      : 'No new messages.';
  return done(
    state,
    ok(`${got}${heldNote(rest, plain, allowance)}`, {
      messages,
      message_ids: out.map((e) => e.message_id),
      untrusted_notice: UNTRUSTED_NOTICE,
      remaining,
      ...(full ? { more_than_fits: true } : {}),
      ...(notices.length ? { notice: notices.join('\n') } : {}),
    }),
    [],
    history.length ? { history } : undefined,
    changed || history.length > 0,
  );
}

/** Why pending mail stayed behind: per held channel (paused, or out of budget) how many of the
 *  caller's envelopes wait there and what frees them, so a pull never reads as an empty inbox. */
function heldNote(
  rest: readonly string[],
  plain: Readonly<Record<string, Envelope>>,
  allowance: ReadonlyMap<string, { ch: Channel; left: number; handed: number }>,
): string {
  const waiting = new Map<string, number>();
  for (const id of rest) {
    const a = allowance.get(plain[id]!.channel_id);
    if (a && a.handed >= a.left) waiting.set(a.ch.id, (waiting.get(a.ch.id) ?? 0) + 1);
  }
  const notes = [...waiting].map(([id, n]) => {
    const ch = raw(allowance.get(id)!.ch);
    return ch.paused
      ? ` ${n} wait on "${ch.name}", which is paused; they are handed over when it is resumed.`
      : ` ${n} wait on "${ch.name}", whose budget (messages or run time) is spent; they stay pending while it holds.`;
  });
  return notes.join('');
}

/** Recipients with pending mail (optionally only those `local` to the calling process). */
export const pendingRecipients = (state: State, local?: (sid: string) => boolean) =>
  Object.entries(state.queues)
    .filter(([sid, q]) => q.length > 0 && (!local || local(sid)))
    .map(([sid]) => sid);

/** The earliest time something becomes due for these recipients: a cooldown or retry ends, or a
 *  pending push envelope passes its stale window. The shell arms one timer for it. */
export function nextDue(state: State, recipients: string[], env: Pick<Env, 'now' | 'spawnHosts'>): number | null {
  const now = env.now;
  let due = Infinity;
  // Whether a channel holds its mail, asked once per channel: a queue of n envelopes asked it n
  // times, each a probe step of the channel machine.
  const held = new Map<string, boolean>();
  for (const rid of recipients) {
    for (const id of state.queues[rid] ?? []) {
      const e = state.messages[id];
      if (e?.delivery_status !== 'pending') continue;
      const at = placement(state, e);
      if (!at) return now;
      let hold = held.get(at.ch.id);
      if (hold === undefined) held.set(at.ch.id, (hold = channelHold(at.ch, now) !== null));
      // Held mail (paused, budget) waits for a resume, which wakes its recipients: no deadline.
      if (hold) continue;
      // Mail a wake hold keeps never ages out: a loop hold waits for a read, new mail or a release
      // (each wakes the recipient); a budget hold for the hour to free a wake.
      const wake = wakeLine(at.ch, rid).held_by;
      if (wake !== null) {
        if (wake === 'wake_budget') due = Math.min(due, Math.max(now, budgetFrees(at.ch, rid, now)));
        continue;
      }
      const w = staleWindow(at.member, env.spawnHosts);
      if (w !== null) due = Math.min(due, e.timestamp + w + 1);
      for (const t of [at.ch.cooldown_until[rid], at.ch.retry_at[rid]])
        if (t !== undefined && t > now) due = Math.min(due, t);
    }
  }
  return due === Infinity ? null : due;
}
