// What Stately Inspector is shown of a project, as a pure function of what `watch` looked at: each
// channel, member, recipient, wake line and envelope is an actor of its machine (machines/index.ts, the one
// copy), with the machine's own state value and the context fields that machine owns, nothing else.
// Envelope events are watch's lines (each envelope's stored receipt, in the order the store
// recorded it); a channel, member or recipient event is the machine's own event that moves the
// stored value before the look to the stored value after it (the path is found in the machine's
// definition). No message content, role prompt or session id is read into an actor: actors are
// named by channel name and role, and contexts come from the machines' persistence mappings.
import { type AnyMachineSnapshot, type AnyStateMachine, transition } from 'xstate';
import {
  channelRecordOf,
  envelopePersistence,
  MACHINES,
  type MachineName,
  memberPersistence,
  type RecipientRecord,
  recipientPersistence,
  channelPersistence,
  toSnapshot,
  wakePersistence,
  type Hold,
  type Persistence,
} from '../../machines/index.ts';
import { type Channel, type Envelope, type Member, type State, TERMINAL_STATUSES } from '../protocol/schema.ts';
import type { WatchLine } from '../cli/watch/diff.ts';
import { wakeLine } from '../engine/wakes.ts';

/** An inspected actor as last shown. */
export interface ActorView {
  id: string;
  machine: MachineName;
  /** The channel actor it belongs to (null for a channel). */
  parent: string | null;
  channel: string;
  value: string;
  context: Record<string, unknown>;
}

export interface InspectSnapshot {
  value: string;
  context: Record<string, unknown>;
  status: 'active' | 'done' | 'stopped';
}

/** One inspection event, in the order they are to be sent. */
export type InspectOp =
  | { op: 'actor'; at: number; id: string; machine: MachineName; parent: string | null; snapshot: InspectSnapshot }
  | { op: 'event'; at: number; id: string; event: { type: string; now: number } }
  | { op: 'snapshot'; at: number; id: string; snapshot: InspectSnapshot; event: { type: string; now: number } | null };

export type Actors = ReadonlyMap<string, ActorView>;

export const channelActorId = (channel: string) => `channel:${channel}`;
export const memberActorId = (channel: string, role: string) => `member:${channel}/${role}`;
export const recipientActorId = (channel: string, role: string) => `recipient:${channel}/${role}`;
export const wakeActorId = (channel: string, role: string) => `wake:${channel}/${role}`;
export const envelopeActorId = (messageId: string) => `envelope:${messageId}`;

const machineOf = (name: MachineName) => MACHINES[name].machine as unknown as AnyStateMachine;
const isFinal = (name: MachineName, value: string) =>
  (machineOf(name).root.states[value] as { type?: string } | undefined)?.type === 'final';
/** A plain copy: the state a look hands in changes in place after it. */
const copy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

export const snapshotOf = (a: Pick<ActorView, 'machine' | 'value' | 'context'>, stopped = false): InspectSnapshot => ({
  value: a.value,
  context: copy(a.context),
  status: stopped ? 'stopped' : isFinal(a.machine, a.value) ? 'done' : 'active',
});

const stateOf = <R>(p: unknown, record: R) =>
  (p as Persistence<AnyStateMachine, R>).toState(record) as { value: string; context: Record<string, unknown> };

function recipientRecord(state: Readonly<State>, ch: Channel, m: Member): RecipientRecord {
  const sid = m.session_id;
  const inFlight = Object.values(state.messages).some(
    (e) => e.channel_id === ch.id && e.recipient_session_id === sid && e.delivery_status === 'in_flight',
  );
  return {
    in_flight: inFlight,
    cooldown_until: ch.cooldown_until[sid] ?? null,
    retry_at: ch.retry_at[sid] ?? null,
    held_by: (ch.holds[sid] as Hold | undefined) ?? null,
    cooldown_ms: ch.delivery_cooldown_ms,
  };
}

/** Every channel, member and recipient actor of the state now (envelopes follow their receipts).
 *  A saved or deleted channel keeps its channel actor; it has no members. */
export function standingActors(state: Readonly<State>, only?: string): Map<string, ActorView> {
  const out = new Map<string, ActorView>();
  for (const ch of Object.values(state.channels)) {
    if (only !== undefined && ch.name !== only) continue;
    const cid = channelActorId(ch.name);
    const c = stateOf(channelPersistence, channelRecordOf(ch, ch.lifecycle, ch.paused));
    out.set(cid, { id: cid, machine: 'channel', parent: null, channel: ch.name, ...c });
    for (const m of ch.members) {
      const mid = memberActorId(ch.name, m.role);
      const ms = stateOf(memberPersistence, { stale: m.stale, stale_at: m.stale_at, removed: false });
      out.set(mid, { id: mid, machine: 'member', parent: cid, channel: ch.name, ...ms });
      const rid = recipientActorId(ch.name, m.role);
      const rs = stateOf(recipientPersistence, recipientRecord(state, ch, m));
      out.set(rid, { id: rid, machine: 'recipient', parent: cid, channel: ch.name, ...rs });
      const wid = wakeActorId(ch.name, m.role);
      const ws = stateOf(wakePersistence, wakeLine(ch, m.session_id));
      out.set(wid, { id: wid, machine: 'wake', parent: cid, channel: ch.name, ...ws });
    }
  }
  return out;
}

/** The envelope machine's snapshot of a stored envelope (its `delivery_status` and own fields). */
export function envelopeView(e: Envelope, channel: string): ActorView {
  const s = stateOf(envelopePersistence, e);
  return { id: envelopeActorId(e.message_id), machine: 'envelope', parent: channelActorId(channel), channel, ...s };
}

/** The live envelopes of the state not shown yet, as actors (a look's first registration): a
 *  look passes every live envelope, so only the ones `shown` lacks are mapped. One whose `newest`
 *  copy ended is not new: the state was read before the log that shows it ended (PostgreSQL can). */
export function liveEnvelopes(
  state: Readonly<State>,
  shown: Actors,
  only?: string,
  newest?: ReadonlyMap<string, Envelope>,
): ActorView[] {
  const names = new Map(Object.values(state.channels).map((c) => [c.id, c.name]));
  const out: ActorView[] = [];
  for (const e of Object.values(state.messages)) {
    if (shown.has(envelopeActorId(e.message_id))) continue;
    if (TERMINAL_STATUSES.includes(newest?.get(e.message_id)?.delivery_status ?? e.delivery_status)) continue;
    const channel = names.get(e.channel_id) ?? e.channel_id;
    if (only === undefined || channel === only) out.push(envelopeView(e, channel));
  }
  return out;
}

/** One step of a machine's own definition. */
export interface Step {
  event: string;
  target: string;
}

/** How many of `hints` a run of events takes in their order (each hint once). */
function inOrder(events: readonly string[], hints: readonly string[]): number {
  let next = 0;
  let n = 0;
  for (const e of events) {
    const at = hints.indexOf(e, next);
    if (at < 0) continue;
    n++;
    next = at + 1;
  }
  return n;
}

/** The hinted self-transitions of a state, once each, in the hints' order (a send and a hand-over
 *  in one look are both the channel's). */
function selfSteps(edges: Step[], at: string, hints: readonly string[]): Step[] {
  return hints.flatMap((h) => {
    const s = edges.find((e) => e.target === at && e.event === h);
    return s ? [s] : [];
  });
}

/** Longest run of events looked for between two stored values (the machines are small). */
const MAX_RUN = 3;

/**
 * The run of the machine's own events from `from` to `to` in its definition: the shortest, and
 * among those the one that takes the most of `hints` (the events this look saw for the actor) in
 * their order, then the one with the fewest other events. When the value did not move: the hinted
 * self-transitions. `[]` when there is none, or no run is found.
 */
export function eventsBetween(name: MachineName, from: string, to: string, hints: readonly string[]): Step[] {
  const root = machineOf(name).root;
  const edges = (key: string): Step[] => {
    const node = root.states[key];
    const out: Step[] = [];
    for (const [event, ts] of node?.transitions ?? [])
      for (const t of ts) out.push({ event, target: (t.target?.[0] as { key: string } | undefined)?.key ?? key });
    return out;
  };
  // A channel's self-transitions each count something (a send, a hand-over); a recipient's are one
  // hold or wait, so one is named.
  if (from === to) return selfSteps(edges(from), from, hints).slice(0, name === 'channel' ? undefined : 1);
  const runs: Step[][] = [];
  const walk = (key: string, run: Step[], visited: Set<string>) => {
    if (run.length >= MAX_RUN) return;
    for (const step of edges(key)) {
      if (step.target === to) runs.push([...run, step]);
      else if (!visited.has(step.target)) walk(step.target, [...run, step], new Set([...visited, step.target]));
    }
  };
  walk(from, [], new Set([from]));
  const score = (r: Step[]) => {
    const events = r.map((s) => s.event);
    return [r.length, -inOrder(events, hints), events.filter((e) => !hints.includes(e)).length];
  };
  const compare = (a: number[], b: number[]) => a.map((x, k) => x - b[k]!).find((d) => d !== 0) ?? 0;
  let best: Step[] = [];
  for (const r of runs) if (!best.length || compare(score(r), score(best)) < 0) best = r;
  return best;
}

/** The envelope machine's snapshot after `event`, replayed with the machine's own `transition()`
 *  from the one before; the stored receipt says where it went, the event carries what it must
 *  for the guard to agree. Null when the machine does not go there (then the record is used). */
export function replayEnvelope(before: ActorView, line: Extract<WatchLine, { kind: 'envelope' }>, record: Envelope) {
  const p = envelopePersistence as unknown as Persistence<AnyStateMachine, unknown>;
  const snap = toSnapshot(p, { delivery_status: before.value, ...before.context }) as AnyMachineSnapshot;
  const stale = line.to === 'stale';
  const event = {
    type: line.event,
    now: line.at,
    window_ms: stale ? -1 : null,
    by: record.in_flight_by ?? '',
    method: record.delivery_method ?? 'pull',
  };
  const [next] = transition(p.machine, snap as never, event as never) as unknown as [AnyMachineSnapshot];
  if (next.value !== line.to) return null;
  return { value: String(next.value), context: copy(next.context) as Record<string, unknown> };
}
