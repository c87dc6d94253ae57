// The protocol fields are the single copy of the truth: a machine snapshot is rebuilt from a
// record (`machine.resolveState`) for one pure `transition()`, then mapped back to fields.
import { transition, type AnyStateMachine, type EventFromLogic, type ExecutableActionsFrom, type SnapshotFrom } from 'xstate';

export interface Persistence<M extends AnyStateMachine, R> {
  readonly machine: M;
  toSnapshot(record: R): SnapshotFrom<M>;
  toRecord(snapshot: SnapshotFrom<M>): R;
}

export interface Step<M extends AnyStateMachine, R> {
  record: R;
  snapshot: SnapshotFrom<M>;
  /** false when no transition was enabled for the event (XState returns the same snapshot). */
  changed: boolean;
  /** The custom (non-assign) actions of the transition, e.g. a channel gate's `refuse`. */
  actions: ExecutableActionsFrom<M>[];
}

/** Applies one event to a persisted record. */
export function step<M extends AnyStateMachine, R>(p: Persistence<M, R>, record: R, event: EventFromLogic<M>): Step<M, R> {
  const before = p.toSnapshot(record);
  const [after, actions] = transition(p.machine, before, event);
  return { record: after === before ? record : p.toRecord(after), snapshot: after, changed: after !== before, actions };
}

export const definePersistence = <M extends AnyStateMachine, R>(p: Persistence<M, R>) => p;
