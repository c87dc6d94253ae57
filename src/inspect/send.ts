// Inspection ops (model.ts) sent through a Stately inspector (`@statelyai/inspect`), and the shell
// that feeds it from `watch`'s looks at the store.
//
// Each actor is handed to the inspector as an actor-like object, not a bare id: in
// @statelyai/inspect 0.7.2 `inspector.actor(id, snapshot, { definition, parentId })` with a string
// id drops both the definition and the parent (they are read from `actorRef.logic.config` and
// `actorRef._parent`). The object carries the machine from machines/index.ts as its logic, so the
// definition Stately draws is the runtime's own config, and its channel actor as its parent.
import type { createInspector, StatelyInspectionEvent } from '@statelyai/inspect';
import type { AnyStateMachine } from 'xstate';
import { MACHINES, type MachineName } from '../../machines/index.ts';
import { streamChanges, type Look } from '../cli/watch/stream.ts';
import type { Store, Subscription } from '../store/index.ts';
import type { InspectOp } from './model.ts';
import { inspectLook, nothingShown } from './diff.ts';

export type StatelyInspector = Pick<ReturnType<typeof createInspector>, 'actor' | 'event' | 'snapshot'>;

interface ActorLike {
  sessionId: string;
  id: string;
  logic?: { config: unknown };
  _parent?: ActorLike;
  send(): void;
  subscribe(): { unsubscribe(): void };
}

/** The actor-like object of an actor id (one per id and sender, so its parent chain stays the same). */
function refOf(refs: Map<string, ActorLike>, id: string, machine?: MachineName, parent?: string | null): ActorLike {
  const have = refs.get(id);
  if (have && machine === undefined) return have;
  const ref: ActorLike = {
    sessionId: id,
    id,
    send: () => {},
    subscribe: () => ({ unsubscribe() {} }),
    ...(machine ? { logic: { config: (MACHINES[machine].machine as unknown as AnyStateMachine).config } } : {}),
    ...(parent ? { _parent: refOf(refs, parent) } : {}),
  };
  refs.set(id, ref);
  return ref;
}

/** A sender of ops through one inspector, in order. */
export function opSender(inspector: StatelyInspector): (ops: readonly InspectOp[]) => void {
  const refs = new Map<string, ActorLike>();
  return (ops) => {
    for (const o of ops) {
      if (o.op === 'actor') inspector.actor(refOf(refs, o.id, o.machine, o.parent) as never, o.snapshot);
      else if (o.op === 'event') inspector.event(refOf(refs, o.id) as never, o.event);
      else inspector.snapshot(refOf(refs, o.id) as never, o.snapshot, o.event ? { event: o.event } : {});
      if (o.op === 'snapshot' && o.snapshot.status !== 'active') refs.delete(o.id);
    }
  };
}

/** Feeds looks to the inspector, keeping what was shown. */
export function inspectorFeed(inspector: StatelyInspector, only?: string) {
  let shown = nothingShown();
  const send = opSender(inspector);
  return (look: Look) => {
    const r = inspectLook(shown, look, only);
    shown = r.shown;
    send(r.ops);
  };
}

/** A project (or one channel) followed into an inspector on its own subscription, as `watch`
 *  follows it: the console's inspect stream. */
export function inspectStore(
  store: Store,
  inspector: StatelyInspector,
  opts: { channel?: string; log: (line: string) => void },
): Promise<Subscription> {
  return streamChanges(store, {
    channel: opts.channel,
    log: opts.log,
    onLines: () => {},
    onLook: inspectorFeed(inspector, opts.channel),
  });
}

/** The inspection events an adapter received, as plain JSON (what leaves the process). */
export type InspectionEvent = StatelyInspectionEvent;
