// The protocol fields are the single copy of the truth: a machine snapshot is rebuilt from a
// record (`machine.resolveState`) for one pure transition, then mapped back to fields.
import {
  createActor, type ActorScope, type AnyStateMachine, type EventFromLogic, type ExecutableActionsFrom, type SnapshotFrom,
} from 'xstate';

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

/** XState's `transition(logic, snapshot, event)` builds a throw-away actor scope on every call,
 *  which was half the cost of a step. These machines have no children, invokes or delays, so one
 *  inert scope per machine serves every call; actions are collected, never executed. */
const scopes = new WeakMap<AnyStateMachine, { scope: ActorScope<any, any>; collected: unknown[] }>();

export function pureTransition<M extends AnyStateMachine>(machine: M, snapshot: SnapshotFrom<M>, event: EventFromLogic<M>): [SnapshotFrom<M>, ExecutableActionsFrom<M>[]] {
  let cached = scopes.get(machine);
  if (!cached) {
    const self = createActor(machine as AnyStateMachine); // never started: only a scope for the pure step
    const collected: unknown[] = [];
    const scope = {
      self, defer: () => {}, id: '', logger: () => {}, sessionId: '', stopChild: () => {}, system: self.system, emit: () => {},
      actionExecutor: (a: unknown) => void collected.push(a),
    } as unknown as ActorScope<any, any>;
    cached = { scope, collected };
    scopes.set(machine, cached);
  }
  cached.collected.length = 0;
  const next = machine.transition(snapshot, event, cached.scope) as SnapshotFrom<M>;
  return [next, [...cached.collected] as ExecutableActionsFrom<M>[]];
}

/** Applies one event to a persisted record. */
export function step<M extends AnyStateMachine, R>(p: Persistence<M, R>, record: R, event: EventFromLogic<M>): Step<M, R> {
  const before = p.toSnapshot(record);
  const [after, actions] = pureTransition(p.machine, before, event);
  return { record: after === before ? record : p.toRecord(after), snapshot: after, changed: after !== before, actions };
}

export const definePersistence = <M extends AnyStateMachine, R>(p: Persistence<M, R>) => p;
