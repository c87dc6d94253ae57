// What the inspector tests compare: each inspection event reduced to one line (kind, actor, event,
// state value, status, parent), and the waits between the scenario's steps.
import { setTimeout as sleep } from 'node:timers/promises';
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import type { Ids } from './scenario.ts';

/** One event as a line: `actor <id> <value> [parent]`, `event <id> <TYPE>`, `snapshot <id> <value> <status>`. */
export function line(e: StatelyInspectionEvent): string {
  if (e.type === '@xstate.actor')
    return `actor ${e.sessionId} ${(e.snapshot as { value?: unknown }).value}${e.parentId ? ` < ${e.parentId}` : ''}`;
  if (e.type === '@xstate.event') return `event ${e.sessionId} ${e.event.type}`;
  const s = e.snapshot as { value?: unknown; status?: string };
  return `snapshot ${e.sessionId} ${s.value} ${s.status}`;
}

export const summary = (events: StatelyInspectionEvent[]) => events.map(line);

/**
 * Whether `got` is the scenario's `want`: every line there, and each actor's lines in `want`'s
 * order (what Stately Inspector shows of one actor). Across actors the order is the order of the
 * looks: a look can read the state before the history log that is newer (the file store and
 * PostgreSQL both), and then the channel's HAND_OVER of a pull shows one look after the envelope's
 * PULL. Returns what differs, or null.
 */
export function differs(got: readonly string[], want: readonly string[]): unknown {
  const a = perActor(got);
  const b = perActor(want);
  if (JSON.stringify(a) !== JSON.stringify(b)) return { got: a, want: b };
  const sorted = (l: readonly string[]) => [...l].sort();
  return JSON.stringify(sorted(got)) === JSON.stringify(sorted(want)) ? null : { got, want };
}

/** The lines of each actor, in their order (what Stately Inspector shows of one actor). */
export function perActor(lines: readonly string[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const l of lines) (out[l.split(' ')[1]!] ??= []).push(l);
  return out;
}

/** The event each step must have produced before the next one runs. */
const MARKS: Record<string, (id?: string) => string> = {
  send: (id) => `actor envelope:${id} pending < channel:team`,
  drain: (id) => `event envelope:${id} DRAIN`,
  sweep: (id) => `event envelope:${id} SWEEP`,
  pull: (id) => `event envelope:${id} PULL`,
  pause: () => 'event channel:team PAUSE',
  save: () => 'event channel:team SAVE',
};

/** Waits until the step's mark arrived, then a little longer for the rest of its look; the
 *  mark's index among the events. */
export async function settled(
  events: () => StatelyInspectionEvent[] | Promise<StatelyInspectionEvent[]>,
  step: string,
  id?: string,
  ms = 3000,
): Promise<number> {
  const mark = MARKS[step]!(id);
  const until = Date.now() + ms;
  let seen = summary(await events());
  while (!seen.includes(mark)) {
    if (Date.now() > until) throw new Error(`no "${mark}" within ${ms} ms: ${seen.join('\n')}`);
    await sleep(5);
    seen = summary(await events());
  }
  const at = seen.indexOf(mark);
  await sleep(150);
  return at;
}

/** The scenario's events, as the store recorded them (scenario.ts). */
export function expected({ pushed, pulled }: Ids): string[] {
  const out = `envelope:${pushed}`;
  const back = `envelope:${pulled}`;
  return [
    // Registered when the inspector starts: the channel, its members, their recipient and wake lines.
    'actor channel:team active',
    'actor member:team/Lead linked < channel:team',
    'actor recipient:team/Lead ready < channel:team',
    'actor wake:team/Lead quiet < channel:team',
    'actor member:team/Pusher linked < channel:team',
    'actor recipient:team/Pusher ready < channel:team',
    'actor wake:team/Pusher quiet < channel:team',
    // send: the channel's SEND gate, then the new envelope.
    'event channel:team SEND',
    'snapshot channel:team active active',
    `actor ${out} pending < channel:team`,
    // drain: the hand-over, the envelope in flight, its recipient delivering.
    'event channel:team HAND_OVER',
    'snapshot channel:team active active',
    `event ${out} DRAIN`,
    `snapshot ${out} in_flight active`,
    'event recipient:team/Pusher DRAIN',
    'snapshot recipient:team/Pusher delivering active',
    // the drain is a wake: Pusher's wake line records it.
    'event wake:team/Pusher WAKE',
    'snapshot wake:team/Pusher woken active',
    // sweep: the owner died; the envelope goes back to pending, its recipient cools down.
    `event ${out} SWEEP`,
    `snapshot ${out} pending active`,
    'event recipient:team/Pusher SWEEP',
    'snapshot recipient:team/Pusher cooling active',
    // A reply, pulled by Lead.
    'event channel:team SEND',
    'snapshot channel:team active active',
    `actor ${back} pending < channel:team`,
    'event channel:team HAND_OVER',
    'snapshot channel:team active active',
    `event ${back} PULL`,
    `snapshot ${back} delivered done`,
    // pause.
    'event channel:team PAUSE',
    'snapshot channel:team paused active',
    // save: the channel is saved, its members removed; the mail still pending is archived with it
    // and its recipient lines end (stopped: no machine event ends them).
    'event channel:team SAVE',
    'snapshot channel:team saved active',
    'event member:team/Lead REMOVE',
    'snapshot member:team/Lead removed done',
    'event member:team/Pusher REMOVE',
    'snapshot member:team/Pusher removed done',
    `snapshot ${out} pending stopped`,
    'snapshot recipient:team/Lead ready stopped',
    'snapshot recipient:team/Pusher cooling stopped',
    'snapshot wake:team/Lead quiet stopped',
    'snapshot wake:team/Pusher woken stopped',
  ];
}

const MACHINE_CONTEXT: Record<string, string[]> = {
  envelope: ['attempts', 'delivered_at', 'delivery_method', 'in_flight_at', 'in_flight_by', 'timestamp'],
  recipient: ['cooldown_ms', 'cooldown_until', 'held_by', 'retry_at'],
  channel: [
    'budgets',
    'created_at',
    'delivered_total',
    'lifecycle_at',
    'max_hops',
    'paused_at',
    'rate',
    'rate_limit',
    'stale_event_ms',
  ],
  member: ['stale_at'],
  wake: ['at', 'base', 'chain', 'ended_by', 'ended_since', 'held_by', 'held_newest', 'held_since', 'starts'],
};

/** JSON with every object's keys sorted (the inspector's serializer sorts them). */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );

/** What every event carries beyond its line: an actor its machine's definition (the runtime's own
 *  config) and its channel as root; a snapshot only its machine's context fields; an event only
 *  its type and time. Returns the breaches. */
export function shapeBreaches(events: StatelyInspectionEvent[], configs: Record<string, unknown>): string[] {
  const out: string[] = [];
  const machineOf = new Map<string, string>();
  for (const e of events) {
    if (e.type === '@xstate.actor') {
      machineOf.set(e.sessionId, e.name);
      const def = JSON.parse(e.definition ?? 'null');
      if (canonical(def?.states) !== canonical(JSON.parse(JSON.stringify(configs[e.name])).states))
        out.push(`${e.sessionId}: definition is not the ${e.name} machine's config`);
    }
    if (e.type === '@xstate.event' && Object.keys(e.event).sort().join() !== 'now,type')
      out.push(`${e.sessionId}: event carries ${Object.keys(e.event)}`);
    if (e.type !== '@xstate.event') {
      const keys = Object.keys((e.snapshot as { context?: object }).context ?? {}).sort();
      const want = MACHINE_CONTEXT[machineOf.get(e.sessionId) ?? ''];
      if (JSON.stringify(keys) !== JSON.stringify(want)) out.push(`${e.sessionId}: context ${keys}`);
    }
  }
  return out;
}
