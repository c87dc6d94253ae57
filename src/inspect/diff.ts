// One look of `watch` (src/cli/watch/stream.ts `Look`) turned into inspection events: the actors that
// appeared, every envelope transition of watch's lines as the envelope machine's own event and
// snapshot, and the channel, member and recipient moves between the last look and this one. Pure.
import { initialTransition } from 'xstate';
import { envelopeMachine, type MachineName } from '../../machines/index.ts';
import type { Envelope } from '../protocol/schema.ts';
import type { WatchLine } from '../cli/watch/diff.ts';
import type { Look } from '../cli/watch/stream.ts';
import {
  type ActorView,
  type Actors,
  envelopeActorId,
  envelopeView,
  eventsBetween,
  type InspectOp,
  liveEnvelopes,
  recipientActorId,
  channelActorId,
  replayEnvelope,
  snapshotOf,
  standingActors,
} from './model.ts';

type EnvelopeLine = Extract<WatchLine, { kind: 'envelope' }>;
/** Within one instant: a channel before what happens in it, an envelope before its recipient. */
const RANK: Record<MachineName, number> = { channel: 0, member: 1, envelope: 2, recipient: 3, wake: 4 };

/** The newest copy of every envelope the look read (the longer receipt is the newer). */
function records(look: Look): Map<string, Envelope> {
  const out = new Map<string, Envelope>();
  for (const e of [...Object.values(look.state.messages), ...look.logged]) {
    const have = out.get(e.message_id);
    if (!have || e.transitions.length > have.transitions.length) out.set(e.message_id, e);
  }
  return out;
}

const registration = (a: ActorView, at: number): InspectOp => ({
  op: 'actor',
  at,
  id: a.id,
  machine: a.machine,
  parent: a.parent,
  snapshot: snapshotOf(a),
});

/** The envelope machine's first snapshot for a stored envelope (`initialTransition`, its input). */
function created(e: Envelope, channel: string): ActorView {
  const [s] = initialTransition(envelopeMachine, { timestamp: e.timestamp });
  return { ...envelopeView(e, channel), value: String(s.value), context: { ...s.context } };
}

/** Watch's envelope lines as actors, events and snapshots; `actors` is updated in place. */
function envelopeOps(actors: Map<string, ActorView>, lines: EnvelopeLine[], recs: Map<string, Envelope>): InspectOp[] {
  const ops: InspectOp[] = [];
  const last = new Map(lines.map((l, i) => [l.message_id, i]));
  lines.forEach((line, i) => {
    const id = envelopeActorId(line.message_id);
    const rec = recs.get(line.message_id);
    const before = actors.get(id);
    if (line.event === 'PURGE') {
      // Live mail that left with its session (saved: archived; deleted: discarded): no machine event.
      if (before) ops.push({ op: 'snapshot', at: line.at, id, snapshot: snapshotOf(before, true), event: null });
      actors.delete(id);
      return;
    }
    if (!rec) return;
    const exact = envelopeView(rec, line.channel);
    if (!before) {
      const first = line.from === null && last.get(line.message_id) !== i ? created(rec, line.channel) : exact;
      const shown = line.from === null ? first : { ...exact, value: line.from };
      ops.push(registration(shown, line.at));
      actors.set(id, shown);
      if (line.from === null) return;
    }
    const prior = actors.get(id)!;
    const after =
      last.get(line.message_id) === i
        ? exact
        : { ...exact, ...(replayEnvelope(prior, line, rec) ?? { value: line.to }) };
    const event = { type: line.event, now: line.at };
    ops.push({ op: 'event', at: line.at, id, event });
    ops.push({ op: 'snapshot', at: line.at, id, snapshot: snapshotOf(after), event });
    actors.set(id, after);
  });
  for (const [id, a] of actors) if (a.machine === 'envelope' && snapshotOf(a).status === 'done') actors.delete(id);
  return ops;
}

export interface Hint {
  events: string[];
  at: Map<string, number>;
}

/** What was shown so far: the actors, and the channel counts a look's lines announced that its
 *  state did not show yet (kept for the next look only). */
export interface Shown {
  actors: Actors;
  carried: ReadonlyMap<string, Hint>;
}

export const nothingShown = (): Shown => ({ actors: new Map(), carried: new Map() });

/** The channel context field each counted self-transition writes (machines/channel.ts: SEND's
 *  `recordSend`, HAND_OVER's `countHandOver`; test/stately/model.test.ts holds this to the machine). */
export const COUNTED: Readonly<Record<string, string>> = { SEND: 'rate', HAND_OVER: 'delivered_total' };

/** Both hints in one, the carried ones first (they happened first). */
function merged(a: Hint | undefined, b: Hint | undefined): Hint | undefined {
  if (!a || !b) return a ?? b;
  const at = new Map([...b.at, ...a.at]);
  return { events: [...new Set([...a.events, ...b.events])], at };
}

/** A channel's counted hints whose field the state shows unchanged: the state was read before the
 *  log that announced them (PostgreSQL can), so they are kept for the next look. */
function unshown(before: ActorView | undefined, now_: ActorView, hint: Hint | undefined): Hint | undefined {
  if (now_.machine !== 'channel' || !hint) return undefined;
  const same = (f: string) => JSON.stringify(before?.context[f]) === JSON.stringify(now_.context[f]);
  const events = hint.events.filter((e) => e in COUNTED && same(COUNTED[e]!));
  return events.length ? { events, at: new Map(events.map((e) => [e, hint.at.get(e)!])) } : undefined;
}

/** What each channel and recipient was seen doing in this look's lines: the events to try first. */
function hintsOf(lines: EnvelopeLine[]): Map<string, Hint> {
  const out = new Map<string, Hint>();
  const add = (id: string, event: string, at: number) => {
    const h: Hint = out.get(id) ?? { events: [], at: new Map() };
    if (!h.at.has(event)) {
      h.events.push(event);
      h.at.set(event, at);
    }
    out.set(id, h);
  };
  for (const l of lines) {
    const cid = channelActorId(l.channel);
    if (l.event === 'SEND') add(cid, 'SEND', l.at);
    if (l.event === 'DRAIN' || l.event === 'PULL') add(cid, 'HAND_OVER', l.at);
    add(recipientActorId(l.channel, l.recipient_role), l.event, l.at);
  }
  return out;
}

/** When a channel or member event happened, where its own context says so. */
function eventAt(a: ActorView, event: string, hint: Hint | undefined, now: number): number {
  const c = a.context;
  const stamp =
    event === 'PAUSE'
      ? c.paused_at
      : event === 'SAVE' || event === 'DELETE'
        ? c.lifecycle_at
        : event === 'MARK_STALE'
          ? c.stale_at
          : null;
  return typeof stamp === 'number' ? stamp : (hint?.at.get(event) ?? now);
}

/** The machine's events from the view shown last to the view now, each with its snapshot. */
function moveOps(before: ActorView, now_: ActorView, hint: Hint | undefined, now: number): InspectOp[] {
  const waiting = unshown(before, now_, hint)?.events ?? [];
  const hints = [
    ...(hint?.events ?? []).filter((e) => !waiting.includes(e)),
    ...(now_.machine === 'recipient' ? ['TICK'] : []),
  ];
  // A channel that also sent or handed over before it moved (one look): those first.
  const counted =
    now_.machine === 'channel' && before.value !== now_.value
      ? eventsBetween('channel', before.value, before.value, hints)
      : [];
  const steps = [...counted, ...eventsBetween(now_.machine, before.value, now_.value, hints)];
  if (!steps.length) return [{ op: 'snapshot', at: now, id: now_.id, snapshot: snapshotOf(now_), event: null }];
  const ops: InspectOp[] = [];
  for (const [i, s] of steps.entries()) {
    const at = eventAt(now_, s.event, hint, now);
    const event = { type: s.event, now: at };
    const shown = i === steps.length - 1 ? now_ : { ...now_, value: s.target };
    ops.push(
      { op: 'event', at, id: now_.id, event },
      { op: 'snapshot', at, id: now_.id, snapshot: snapshotOf(shown), event },
    );
  }
  return ops;
}

const bornAt = (a: ActorView, look: Look): number => {
  const ch = Object.values(look.state.channels).find((c) => c.name === a.channel);
  if (a.machine === 'channel') return ch?.created_at ?? look.now;
  const role = a.id.slice(a.id.indexOf('/') + 1);
  return ch?.members.find((m) => m.role === role)?.joined_at ?? look.now;
};

/** Channels, members and recipients: registrations, moves, and those that are gone. */
function standingOps(
  actors: Map<string, ActorView>,
  look: Look,
  hints: Map<string, Hint>,
  carried: Map<string, Hint>,
  only?: string,
) {
  const ops: InspectOp[] = [];
  const standing = standingActors(look.state, only);
  const fresh = new Map(carried);
  carried.clear();
  for (const [id, a] of standing) {
    const before = actors.get(id);
    const hint = merged(fresh.get(id), hints.get(id));
    actors.set(id, a);
    const wait = unshown(before, a, hints.get(id)); // carried once only
    if (wait) carried.set(id, wait);
    if (!before) ops.push(registration(a, bornAt(a, look)));
    else if (before.value !== a.value || JSON.stringify(before.context) !== JSON.stringify(a.context))
      ops.push(...moveOps(before, a, hint, look.now));
  }
  for (const [id, a] of actors) {
    if (a.machine === 'envelope' || standing.has(id)) continue;
    actors.delete(id);
    if (a.machine === 'member') {
      const event = { type: 'REMOVE', now: look.now };
      ops.push({ op: 'event', at: look.now, id, event });
      ops.push({ op: 'snapshot', at: look.now, id, snapshot: snapshotOf({ ...a, value: 'removed' }), event });
    } else ops.push({ op: 'snapshot', at: look.now, id, snapshot: snapshotOf(a, true), event: null });
  }
  return ops;
}

/**
 * The inspection events of one look, in the order the store recorded them (by time; within one
 * instant a channel before its envelopes, an envelope before its recipient), and the actors as
 * shown after it. `only`: one channel's actors (a channel name).
 */
export function inspectLook(prev: Shown, look: Look, only?: string): { ops: InspectOp[]; shown: Shown } {
  const actors = new Map(prev.actors);
  const carried = new Map(prev.carried);
  const lines = look.lines.filter(
    (l): l is EnvelopeLine => l.kind === 'envelope' && (only === undefined || l.channel === only),
  );
  const recs = records(look);
  const ops = [...standingOps(actors, look, hintsOf(lines), carried, only), ...envelopeOps(actors, lines, recs)];
  for (const e of liveEnvelopes(look.state, actors, only, recs)) {
    ops.push(registration(e, e.context.timestamp as number));
    actors.set(e.id, e);
  }
  const machineOfOp = (o: InspectOp) =>
    o.op === 'actor' ? o.machine : (actors.get(o.id) ?? prev.actors.get(o.id))?.machine;
  const indexed = ops.map((o, i) => ({ o, i, rank: RANK[machineOfOp(o) ?? 'envelope'] }));
  indexed.sort((a, b) => a.o.at - b.o.at || a.rank - b.rank || a.i - b.i);
  return { ops: indexed.map((x) => x.o), shown: { actors, carried } };
}
