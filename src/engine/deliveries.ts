// The live machine view of one session (operator.md "The console"), derived purely from state and `now`:
// per envelope its machine state, attempts, age against the window and what holds it; per
// recipient its recipient-machine state. The console, `opencomms watch` and the tests all call
// these functions, so what the operator sees is exactly what the engine would decide.
import { MAX_DELIVERY_ATTEMPTS } from '../protocol/limits.ts';
import type { Channel, Envelope, Member, SessionsState, State } from '../protocol/schema.ts';
import { channelHold } from './deliver.ts';
import { recipientLine, type RecipientLine } from './transitions.ts';

/** What keeps a pending envelope from being handed over now. `awaiting_pull`: the member reads
 *  its mail (pull tool, hook boundary), nobody pushes it; `busy` / `not_owner`: the hold the
 *  host reported at the last drain. */
export type HoldReason =
  | 'paused'
  | 'budget'
  | 'stale_member'
  | 'ineligible'
  | 'awaiting_pull'
  | 'cooldown'
  | 'busy'
  | 'not_owner';

/** The recipient machine's state as the operator reads it: `blocked:<why>` names the hold. */
export type RecipientState = Exclude<RecipientLine, 'blocked'> | `blocked:${HoldReason}`;

/** Agent states (operator.md "The console"): Offline = stale; Working = pending or in-flight mail addressed to it on
 *  that channel; Idle otherwise. */
export type AgentState = 'Offline' | 'Working' | 'Idle';
export const AGENT_STATE_HELP =
  'Offline: the host session is gone (stale). Working: mail addressed to it on this session is pending or in flight. Idle: neither.';

export interface EnvelopeView {
  message_id: string;
  sender_role: string;
  recipient_role: string;
  recipient_session_id: string;
  message_type: string;
  delivery_status: Envelope['delivery_status'];
  attempts: number;
  max_attempts: number;
  timestamp: number;
  age_ms: number;
  /** The recipient's stale window (null: its mail never ages out, or it left the channel). */
  window_ms: number | null;
  delivery_method: Envelope['delivery_method'];
  delivered_at: number | null;
  held_by: HoldReason | null;
  /** The receipt: every machine transition, with its time. */
  transitions: { event: string; to: string; at: number }[];
}

export interface RecipientView {
  session_id: string;
  role: string;
  host: string;
  delivery_mode: string;
  /** The member machine's state. */
  member_state: 'linked' | 'stale';
  state: RecipientState;
  /** The machine state to highlight (`blocked:<why>` → `blocked`). */
  machine_state: RecipientLine;
  agent_state: AgentState;
  pending: number;
  in_flight: number;
  cooldown_until: number | null;
  retry_at: number | null;
}

export interface DeliveryView {
  name: string;
  /** The channel machine's state. */
  channel_state: 'active' | 'paused' | 'saved' | 'deleted';
  now: number;
  envelopes: EnvelopeView[];
  recipients: RecipientView[];
}

/** One member's live mail on one channel. */
export interface MailCount {
  pending: number;
  in_flight: number;
  /** Its queue holds an envelope of this channel. */
  queued: boolean;
}

/** The live mail of a state grouped once: a view over many members (channel cards, status,
 *  watch's recipient lines) looks each one up here instead of scanning every live envelope per
 *  member, so its cost follows the mail once, not the mail times the members. */
export interface MailIndex {
  /** Channel id → its live envelopes, in state order. */
  byChannel: ReadonlyMap<string, Envelope[]>;
  count(channelId: string, sid: string): MailCount;
}

const NO_MAIL: MailCount = Object.freeze({ pending: 0, in_flight: 0, queued: false });

export function mailIndex(state: Readonly<State>): MailIndex {
  const byChannel = new Map<string, Envelope[]>();
  // channel id → session id → counts: nested maps, no key string built per envelope.
  const counts = new Map<string, Map<string, MailCount>>();
  const at = (channelId: string, sid: string) => {
    let members = counts.get(channelId);
    if (!members) counts.set(channelId, (members = new Map()));
    let c = members.get(sid);
    if (!c) members.set(sid, (c = { pending: 0, in_flight: 0, queued: false }));
    return c;
  };
  const messages = state.messages;
  for (const id in messages) {
    const e = messages[id]!;
    const list = byChannel.get(e.channel_id);
    if (list) list.push(e);
    else byChannel.set(e.channel_id, [e]);
    if (e.delivery_status === 'pending') at(e.channel_id, e.recipient_session_id).pending++;
    else if (e.delivery_status === 'in_flight') at(e.channel_id, e.recipient_session_id).in_flight++;
  }
  for (const sid in state.queues)
    for (const id of state.queues[sid]!) {
      const e = messages[id];
      if (e) at(e.channel_id, sid).queued = true;
    }
  return { byChannel, count: (channelId, sid) => counts.get(channelId)?.get(sid) ?? NO_MAIL };
}

/** Why the member's pending mail on this channel is not handed over now, or null (it would go). */
export function holdOf(ch: Channel, m: Member, now: number): HoldReason | null {
  const channel = channelHold(ch, now);
  if (channel === 'paused' || channel === 'budget') return channel;
  if (m.stale) return 'stale_member';
  const caps = m.endpoint_capabilities;
  // spawn_push needs resume + push and a bound host session (the gate of hosts.md "spawn_push"; the host check is the adapter's).
  if (m.delivery_mode === 'spawn_push' && (!caps.resume || !caps.push || !m.host_session_id)) return 'ineligible';
  if (!caps.push) return caps.pull ? 'awaiting_pull' : 'ineligible';
  const due = Math.max(ch.cooldown_until[m.session_id] ?? 0, ch.retry_at[m.session_id] ?? 0);
  if (due > now) return 'cooldown';
  const host = ch.holds[m.session_id];
  if (host === 'busy' || host === 'not_owner' || host === 'ineligible') return host;
  return null;
}

/** Working (AgentState): mail addressed to the member on that channel is queued or in flight. */
const isWorking = (c: MailCount) => c.queued || c.in_flight > 0;

/** What the session reads show of a whole state: its channels, and each member's Working flag
 *  as agentState decides it. */
export function sessionsOf(state: Readonly<State>): SessionsState {
  const index = mailIndex(state);
  return {
    channels: state.channels,
    working: (channelId, sid) => isWorking(index.count(channelId, sid)),
  };
}

/** `index`: the state's mail index, built once by a caller that asks for many members. */
export function agentState(
  state: Readonly<State>,
  ch: Channel,
  m: Member,
  index: MailIndex = mailIndex(state),
): AgentState {
  if (m.stale) return 'Offline';
  return isWorking(index.count(ch.id, m.session_id)) ? 'Working' : 'Idle';
}

export function recipientView(
  state: Readonly<State>,
  ch: Channel,
  m: Member,
  now: number,
  index: MailIndex = mailIndex(state),
): RecipientView {
  const { pending, in_flight: inFlight } = index.count(ch.id, m.session_id);
  const hold = holdOf(ch, m, now);
  let s: RecipientState;
  if (recipientLine(ch, m.session_id, inFlight > 0) === 'delivering') s = 'delivering';
  else if (hold === 'cooldown') s = 'cooling';
  else if (pending > 0 && hold) s = `blocked:${hold}`;
  else s = 'ready';
  return {
    session_id: m.session_id,
    role: m.role,
    host: m.host,
    delivery_mode: m.delivery_mode,
    member_state: m.stale ? 'stale' : 'linked',
    state: s,
    machine_state: s.startsWith('blocked:') ? 'blocked' : (s as RecipientLine),
    agent_state: agentState(state, ch, m, index),
    pending,
    in_flight: inFlight,
    cooldown_until: ch.cooldown_until[m.session_id] ?? null,
    retry_at: ch.retry_at[m.session_id] ?? null,
  };
}

export function envelopeView(ch: Channel, e: Envelope, now: number): EnvelopeView {
  const m = ch.members.find((x) => x.session_id === e.recipient_session_id);
  return {
    message_id: e.message_id,
    sender_role: e.sender_role,
    recipient_role: e.recipient_role,
    recipient_session_id: e.recipient_session_id,
    message_type: e.message_type,
    delivery_status: e.delivery_status,
    attempts: e.attempts,
    max_attempts: MAX_DELIVERY_ATTEMPTS,
    timestamp: e.timestamp,
    age_ms: now - e.timestamp,
    window_ms: m?.stale_policy.window_ms ?? null,
    delivery_method: e.delivery_method,
    delivered_at: e.delivered_at,
    held_by: e.delivery_status === 'pending' && m ? holdOf(ch, m, now) : null,
    transitions: e.transitions.map(([event, to, at]) => ({ event, to, at })),
  };
}

const channelState = (ch: Channel): DeliveryView['channel_state'] =>
  ch.lifecycle === 'active' ? (ch.paused ? 'paused' : 'active') : ch.lifecycle;

/**
 * The whole view of one session: live envelopes from state plus `logged`, the newest envelopes
 * that already left state for the history log (the shell reads them), newest first.
 */
export function deliveryView(
  state: Readonly<State>,
  ch: Channel,
  logged: readonly Envelope[],
  now: number,
): DeliveryView {
  const index = mailIndex(state);
  const live = index.byChannel.get(ch.id) ?? [];
  const seen = new Set(live.map((e) => e.message_id));
  const all = [...live, ...logged.filter((e) => e.channel_id === ch.id && !seen.has(e.message_id))].sort(
    (a, b) => b.timestamp - a.timestamp,
  );
  return {
    name: ch.name,
    channel_state: channelState(ch),
    now,
    envelopes: all.map((e) => envelopeView(ch, e, now)),
    recipients: ch.members.map((m) => recipientView(state, ch, m, now, index)),
  };
}
