// The protocol fields are the single copy of the truth: a record maps to a machine state (value +
// context) for one transition, then back to fields. The engine steps through `flatTransition`
// (flat.ts), which reads the machine's own definition; XState's snapshots (`toSnapshot`) serve
// the graph, the diagrams and the tests that hold the two to agreement.
import type { AnyStateMachine, ContextFrom, EventFromLogic, SnapshotFrom } from 'xstate';
import { compile, flatTransition, type CollectedAction, type Table } from './flat.ts';

/** A machine state as plain data: what a record maps to and back. */
export interface MachineState<M extends AnyStateMachine> {
  value: string;
  context: ContextFrom<M>;
}

export interface Persistence<M extends AnyStateMachine, R> {
  readonly machine: M;
  toState(record: R): MachineState<M>;
  toRecord(state: MachineState<M>): R;
}

export interface Step<R> {
  record: R;
  value: string;
  /** false when no transition was enabled for the event, or the one taken changed nothing. */
  changed: boolean;
  /** The custom (non-assign) actions of the transition, e.g. a channel gate's `refuse`. */
  actions: CollectedAction[];
}

const tables = new WeakMap<AnyStateMachine, Table>();

function tableOf(machine: AnyStateMachine): Table {
  let t = tables.get(machine);
  if (!t) tables.set(machine, (t = compile(machine)));
  return t;
}

/** Applies one event to a persisted record. */
export function step<M extends AnyStateMachine, R>(p: Persistence<M, R>, record: R, event: EventFromLogic<M>): Step<R> {
  const s = p.toState(record);
  const r = flatTransition(tableOf(p.machine), s.value, s.context as Record<string, unknown>, event);
  return {
    record: r.changed ? p.toRecord({ value: r.value, context: r.context as ContextFrom<M> }) : record,
    value: r.value,
    changed: r.changed,
    actions: r.actions,
  };
}

/** The XState snapshot of a record (graph traversal, diagrams, agreement tests). */
export const toSnapshot = <M extends AnyStateMachine, R>(p: Persistence<M, R>, record: R): SnapshotFrom<M> =>
  p.machine.resolveState(p.toState(record) as never) as SnapshotFrom<M>;

/** Compiles every machine's table now: a machine using a feature flat.ts does not evaluate
 *  fails here, at load, not on its first step. */
export function definePersistence<M extends AnyStateMachine, R>(p: Persistence<M, R>): Persistence<M, R> {
  tableOf(p.machine);
  return p;
}
