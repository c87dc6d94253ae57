// Generates every machine's shortest and simple paths (@xstate/graph) and replays a path through
// the pure `transition()`, JSON round-tripping the persisted record before every step.
import { getShortestPaths, getSimplePaths } from '@xstate/graph';
import { transition, type AnyMachineSnapshot, type AnyStateMachine, type AnyTransitionDefinition } from 'xstate';
import { MACHINES, step, toSnapshot, type MachineName, type Persistence } from '../../machines/index.ts';
import { ALPHABETS } from './alphabets.ts';

type Ev = { type: string; [k: string]: unknown };
export interface GeneratedPath {
  kind: 'shortest' | 'simple';
  name: string;
  events: Ev[];
  value: unknown;
  context: unknown;
}

const persistenceOf = (name: MachineName) => MACHINES[name] as unknown as Persistence<AnyStateMachine, unknown>;
const label = (e: Ev) => `${e.type}${'now' in e ? `@${e.now}` : ''}${'hold' in e && e.hold ? `[${e.hold}]` : ''}`;

export function generatePaths(name: MachineName): GeneratedPath[] {
  const p = persistenceOf(name);
  const { initial, events, identity } = ALPHABETS[name];
  const fromState = toSnapshot(p, initial) as AnyMachineSnapshot;
  const opts = { events: events as Ev[], fromState } as const;
  const toGenerated =
    (kind: GeneratedPath['kind']) => (path: { state: AnyMachineSnapshot; steps: { event: Ev }[] }) => {
      const evs = path.steps.map((s) => s.event).filter((e) => !e.type.startsWith('xstate.'));
      // A coarse identity keeps one state per key, whichever path reached it first: the end of
      // this path is its events folded through transition(), without the replay's round trips.
      const end = identity
        ? evs.reduce((s, e) => transition(p.machine, s, e as never)[0] as AnyMachineSnapshot, fromState)
        : path.state;
      return {
        kind,
        name: `${name} ${kind}: ${evs.map(label).join(' > ') || '(initial)'} => ${JSON.stringify(end.value)}`,
        events: evs,
        value: end.value,
        context: end.context,
      };
    };
  // Shortest paths keyed by edge (source, event, target): one path per reachable transition,
  // self-loops (refusals, holds) included, which a state-keyed traversal would never take.
  const shortest = getShortestPaths(p.machine, {
    ...opts,
    serializeState: (s: AnyMachineSnapshot, e: unknown, prev?: AnyMachineSnapshot) =>
      JSON.stringify([prev?.value, prev?.context, e, s.value, s.context]),
  } as never) as never as Parameters<ReturnType<typeof toGenerated>>[0][];
  const simple = getSimplePaths(p.machine, {
    ...opts,
    ...(identity ? { serializeState: (s: AnyMachineSnapshot) => identity(s.value, s.context) } : {}),
  } as never) as never as Parameters<ReturnType<typeof toGenerated>>[0][];
  return [...shortest.map(toGenerated('shortest')), ...simple.map(toGenerated('simple'))];
}

export interface Replay {
  value: unknown;
  context: unknown;
  taken: AnyTransitionDefinition[];
}

/** Replays events from the alphabet's initial record; the persisted record goes through
 *  JSON.stringify/parse before every step, as it does through state.json. */
export function replay(name: MachineName, events: Ev[]): Replay {
  const p = persistenceOf(name);
  let record: unknown = ALPHABETS[name].initial;
  let snapshot = toSnapshot(p, record) as AnyMachineSnapshot;
  const taken: AnyTransitionDefinition[] = [];
  for (const event of events) {
    const before = toSnapshot(p, JSON.parse(JSON.stringify(record))) as AnyMachineSnapshot;
    taken.push(...(p.machine.getTransitionData(before as never, event as never) as AnyTransitionDefinition[]));
    [snapshot] = transition(p.machine, before as never, event as never) as unknown as [AnyMachineSnapshot];
    record = p.toRecord(snapshot as never);
  }
  return { value: snapshot.value, context: snapshot.context, taken };
}

/** Every transition declared in a machine's definition, with a readable id. */
export function declaredTransitions(machine: AnyStateMachine): Map<AnyTransitionDefinition, string> {
  const out = new Map<AnyTransitionDefinition, string>();
  const walk = (node: AnyStateMachine['root']) => {
    for (const [eventType, list] of node.transitions)
      for (const [i, t] of list.entries())
        out.set(t, `${node.id} --${eventType}#${i}${t.guard ? ` [${describeGuard(t)}]` : ''}-->`);
    for (const child of Object.values(node.states)) walk(child as AnyStateMachine['root']);
  };
  walk(machine.root);
  return out;
}

const describeGuard = (t: AnyTransitionDefinition) =>
  typeof t.guard === 'string' ? t.guard : ((t.guard as { type?: string } | undefined)?.type ?? 'guard');

/** The same replay through the engine's `step()` (flat.ts, the machine's definition evaluated
 *  without XState's interpreter): it must agree with XState's own `transition()` on every
 *  generated path. */
export function replayWithStep(name: MachineName, events: Ev[]): { value: unknown; context: unknown } {
  const p = persistenceOf(name);
  let record: unknown = ALPHABETS[name].initial;
  for (const event of events) record = step(p, JSON.parse(JSON.stringify(record)), event as never).record;
  return p.toState(record);
}
