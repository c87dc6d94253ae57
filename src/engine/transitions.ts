// The only place the engine changes a machine-owned field: each helper maps protocol fields to a
// machine record, steps the machine, and writes the record back (the channel's step also as ops,
// `channelStepOps`, which a planned send hands to the store instead of writing).
import {
  channelPersistence,
  channelRecordOf,
  envelopePersistence,
  memberPersistence,
  recipientPersistence,
  step,
  type ChannelEvent,
  type ChannelRecord,
  type ChannelRefusal,
  type EnvelopeEvent,
  type EnvelopeRecord,
  type EnvelopeStatus,
  type Hold,
  type MemberEvent,
  type RecipientEvent,
} from '../../machines/index.ts';
import { initialTransition } from 'xstate';
import { envelopeMachine } from '../../machines/index.ts';
import { applyOps, raw, type Op } from '../protocol/draft.ts';
import { MAX_SEEN_CONTENT } from '../protocol/limits.ts';
import type { Channel, Envelope, Member } from '../protocol/schema.ts';

// Machine records are read from the plain objects (`raw`): a machine only reads them and returns
// new values, which are written back through the draft so the change is recorded.
const envelopeRecord = (draft: Envelope): EnvelopeRecord => {
  const e = raw(draft);
  return {
    delivery_status: e.delivery_status,
    timestamp: e.timestamp,
    attempts: e.attempts,
    delivered_at: e.delivered_at,
    delivery_method: e.delivery_method,
    in_flight_by: e.in_flight_by,
    in_flight_at: e.in_flight_at,
  };
};

/** The envelope machine's initial state, computed once (initialTransition builds an actor, which
 *  costs more than the rest of a send); only the timestamp differs between envelopes. */
const INITIAL = envelopePersistence.toRecord(initialTransition(envelopeMachine, { timestamp: 0 })[0]);

/** The machine-owned fields of a new envelope: the envelope machine's initial state. Field by
 *  field, because a spread followed by more fields (`{ ...INITIAL, timestamp }`) is slow in V8,
 *  and this runs once per recipient of every send. */
export function acceptedEnvelope(now: number): EnvelopeRecord & { transitions: Envelope['transitions'] } {
  return {
    delivery_status: INITIAL.delivery_status,
    timestamp: now,
    attempts: INITIAL.attempts,
    delivered_at: INITIAL.delivered_at,
    delivery_method: INITIAL.delivery_method,
    in_flight_by: INITIAL.in_flight_by,
    in_flight_at: INITIAL.in_flight_at,
    transitions: [['SEND', INITIAL.delivery_status, now]],
  };
}

/** Applies an envelope event; returns the status after it (unchanged when nothing was enabled). */
export function stepEnvelope(e: Envelope, event: EnvelopeEvent): EnvelopeStatus {
  const r = step(envelopePersistence, envelopeRecord(e), event);
  if (r.changed) {
    Object.assign(e, r.record);
    e.transitions.push([event.type, r.record.delivery_status, event.now]);
  }
  return e.delivery_status;
}

/** A channel event's writes as operations on the channel (paths relative to it), and the refusal
 *  its gate emitted. Reads the plain channel, writes nothing: `stepChannel` applies the writes to
 *  a draft, and a planned send journals them as they are (send.ts). */
export function channelStepOps(c: Channel, event: ChannelEvent): { ops: Op[]; refusal: ChannelRefusal | null } {
  const plain = raw(c);
  const r = step(channelPersistence, channelRecordOf(plain, plain.lifecycle, plain.paused), event);
  const ops: Op[] = [];
  if (r.changed) {
    // Only what the step changed. (Copied with `const { budgets, ...rest } = record`, the rest
    // was a slow dictionary object.)
    const before: ChannelRecord = plain;
    const next = r.record;
    for (const k of Object.keys(next) as Array<keyof ChannelRecord>)
      if (k !== 'budgets' && before[k] !== next[k]) ops.push(['s', [k], next[k]]);
    for (const k of ['max_runtime_ms', 'max_delivered_messages'] as const)
      if (next.budgets[k] !== before.budgets[k]) ops.push(['s', ['budgets', k], next.budgets[k]]);
  }
  let refusal: ChannelRefusal | null = null;
  for (const a of r.actions) {
    if (a.type === 'refuse') refusal = a.params as ChannelRefusal;
    else if (a.type === 'rememberContent' && event.type === 'SEND')
      ops.push(...rememberContent(plain, event.content_key, event.now));
  }
  return { ops, refusal };
}

/** Applies a channel event; returns the refusal its gate emitted, or null. */
export function stepChannel(c: Channel, event: ChannelEvent): ChannelRefusal | null {
  const { ops, refusal } = channelStepOps(c, event);
  if (ops.length) applyOps(c, ops);
  return refusal;
}

/** The channel machine's `rememberContent` (protocol.md "Rules and defaults", duplicate window): `key` at `now`,
 *  after it the newest MAX_SEEN_CONTENT − 1 keys not yet expired, in send order. Entry by entry,
 *  so the journal gets the key and the keys swept, not the window's 100 keys. */
function rememberContent(c: Channel, key: string, now: number): Op[] {
  const seen = c.seen_content;
  const keys = Object.keys(seen);
  const oldest = keys.length - (MAX_SEEN_CONTENT - 1);
  // Expired: now − seen ≥ stale_event_ms. The key's own entry is found by its time first: a
  // string compare per entry (keys share the sender's 29-character prefix) and a re-read of
  // `stale_event_ms` per entry would dominate this function, which runs on every send.
  const cutoff = now - c.stale_event_ms;
  const own = Object.hasOwn(seen, key) ? seen[key] : undefined;
  const ops: Op[] = [];
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const at = seen[k]!;
    if (i < oldest || at <= cutoff || (at === own && k === key)) ops.push(['d', ['seen_content', k]]);
  }
  ops.push(['s', ['seen_content', key], now]);
  return ops;
}

/** Applies a member event; returns false when the member was removed (the caller drops the row). */
export function stepMember(m: Member, event: MemberEvent): { changed: boolean; removed: boolean } {
  const r = step(memberPersistence, { stale: m.stale, stale_at: m.stale_at, removed: false }, event);
  if (r.changed && !r.record.removed) {
    m.stale = r.record.stale;
    m.stale_at = r.record.stale_at;
  }
  return { changed: r.changed, removed: r.record.removed };
}

export type RecipientLine = 'ready' | 'cooling' | 'blocked' | 'delivering';

/** A recipient's line as stored: the channel's `cooldown_until` / `retry_at` / `holds` maps, and
 *  "delivering" derived from in-flight mail. */
const recipientRecord = (draft: Channel, rid: string, inFlight: boolean) => {
  const c = raw(draft);
  return {
    in_flight: inFlight,
    cooldown_until: c.cooldown_until[rid] ?? null,
    retry_at: c.retry_at[rid] ?? null,
    held_by: (c.holds[rid] as Hold | undefined) ?? null,
    cooldown_ms: c.delivery_cooldown_ms,
  };
};

/** Steps one recipient's delivery line on one channel; `changed` = a stored field changed. */
export function stepRecipient(
  c: Channel,
  rid: string,
  inFlight: boolean,
  event: RecipientEvent,
): { line: RecipientLine; changed: boolean } {
  const before = recipientRecord(c, rid, inFlight);
  const r = step(recipientPersistence, before, event);
  const changed =
    r.changed &&
    (r.record.cooldown_until !== before.cooldown_until ||
      r.record.retry_at !== before.retry_at ||
      r.record.held_by !== before.held_by);
  if (changed) {
    setOrDelete(c.cooldown_until, rid, r.record.cooldown_until);
    setOrDelete(c.retry_at, rid, r.record.retry_at);
    setOrDelete(c.holds, rid, r.record.held_by);
  }
  return { line: r.value as RecipientLine, changed };
}

/** The line's state without changing anything (status, send receipts). */
export function recipientLine(c: Channel, rid: string, inFlight: boolean): RecipientLine {
  return recipientPersistence.toState(recipientRecord(c, rid, inFlight)).value as RecipientLine;
}

function setOrDelete<V>(map: Record<string, V>, key: string, value: V | null) {
  if (value === null) delete map[key];
  else map[key] = value;
}
