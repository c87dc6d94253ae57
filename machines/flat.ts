// A flat machine's transition, read from its own definition: the same states, events, guards and
// actions the diagrams and the generated path tests read, evaluated without XState's interpreter.
// XState's `transition()` resolves a snapshot, builds state-node sets and action queues and
// clones the snapshot per assign, a cost paid once per envelope of a pull. These machines are flat (no children, entry/exit actions, delays or
// eventless transitions), so a transition is: the first enabled candidate in document order, its
// assign actions folded over the context in order, its other actions collected with their
// params. `compile()` refuses any feature outside that set, so a machine that grows one fails at
// load instead of stepping differently; test/machines/flat.test.ts checks agreement with
// `transition()` on random walks through every machine.
import type { AnyStateMachine } from 'xstate';

type Context = Record<string, unknown>;
type Event = { type: string };
type Args = { context: Context; event: Event };

/** A non-assign action of a taken transition, as XState's action executor would receive it. */
export interface CollectedAction {
  type: string;
  params: unknown;
}

interface Candidate {
  guard: ((args: Args, params: unknown) => boolean) | null;
  guardParams: unknown;
  target: string | null;
  assigns: Array<(ctx: Context, event: Event) => Context>;
  actions: CollectedAction[];
}

/** state value → event type → candidates in document order. */
export type Table = Map<string, Map<string, Candidate[]>>;

export interface FlatStep {
  value: string;
  context: Context;
  /** Whether the snapshot changed: a new state, or an assign ran (XState's `after !== before`). */
  changed: boolean;
  actions: CollectedAction[];
}

const ALLOWED_STATE_KEYS = new Set(['on', 'type', 'description', 'meta', 'tags']);

type Ref = string | { type: string; params?: unknown };

const list = <T>(x: T | T[] | undefined): T[] => (x === undefined ? [] : Array.isArray(x) ? x : [x]);

function refOf(ref: unknown, what: string, machine: string): { type: string; params: unknown } {
  if (typeof ref === 'string') return { type: ref, params: undefined };
  if (ref && typeof ref === 'object' && typeof (ref as { type?: unknown }).type === 'string') {
    const { type, params } = ref as { type: string; params?: unknown };
    if (typeof params === 'function')
      throw new Error(`${machine}: dynamic params of ${what} "${type}" are not supported`);
    return { type, params };
  }
  throw new Error(`${machine}: inline ${what}s are not supported; name it in setup()`);
}

/** XState's assign: a function returning a partial context, or an object of values and functions. */
function assignOf(assignment: unknown, params: unknown): (ctx: Context, event: Event) => Context {
  if (typeof assignment === 'function')
    return (context, event) => ({ ...context, ...assignment({ context, event }, params) });
  const entries = Object.entries(assignment as Record<string, unknown>);
  return (context, event) => {
    const next = { ...context };
    for (const [k, v] of entries) next[k] = typeof v === 'function' ? v({ context, event }, params) : v;
    return next;
  };
}

export function compile(machine: AnyStateMachine): Table {
  const name = machine.id;
  const config = machine.config as {
    on?: unknown;
    always?: unknown;
    entry?: unknown;
    exit?: unknown;
    states?: Record<string, Record<string, unknown>>;
  };
  if (config.on || config.always || config.entry || config.exit)
    throw new Error(`${name}: root-level transitions and actions are not supported`);
  const impl = machine.implementations as { guards: Record<string, unknown>; actions: Record<string, unknown> };
  const states = config.states ?? {};
  const table: Table = new Map();
  for (const [value, node] of Object.entries(states)) {
    for (const key of Object.keys(node))
      if (!ALLOWED_STATE_KEYS.has(key))
        throw new Error(`${name}.${value}: "${key}" is not supported in a flat machine`);
    const byEvent = new Map<string, Candidate[]>();
    for (const [type, raw] of Object.entries((node.on ?? {}) as Record<string, unknown>)) {
      byEvent.set(
        type,
        list(raw as object | object[]).map((t): Candidate => {
          const def = (typeof t === 'string' ? { target: t } : t) as {
            target?: unknown;
            guard?: Ref;
            actions?: Ref | Ref[];
            reenter?: unknown;
          };
          const keys = Object.keys(def).filter(
            (k) => !['target', 'guard', 'actions', 'description', 'meta'].includes(k),
          );
          if (keys.length) throw new Error(`${name}.${value} on ${type}: "${keys[0]}" is not supported`);
          if (def.target !== undefined && (typeof def.target !== 'string' || !(def.target in states)))
            throw new Error(`${name}.${value} on ${type}: target ${JSON.stringify(def.target)} is not a sibling state`);
          let guard: Candidate['guard'] = null;
          let guardParams: unknown;
          if (def.guard !== undefined) {
            const g = refOf(def.guard, 'guard', name);
            const fn = impl.guards[g.type];
            if (typeof fn !== 'function') throw new Error(`${name}: guard "${g.type}" is not implemented`);
            guard = fn as Candidate['guard'];
            guardParams = g.params;
          }
          const assigns: Candidate['assigns'] = [];
          const actions: CollectedAction[] = [];
          for (const a of list(def.actions)) {
            const ref = refOf(a, 'action', name);
            const fn = impl.actions[ref.type] as
              | (((...args: unknown[]) => unknown) & { type?: string; assignment?: unknown })
              | undefined;
            if (!fn) throw new Error(`${name}: action "${ref.type}" is not implemented`);
            if (fn.type === 'xstate.assign') assigns.push(assignOf(fn.assignment, ref.params));
            else if (typeof fn === 'function' && fn.type === undefined) actions.push(ref);
            else throw new Error(`${name}: built-in action "${fn.type}" is not supported`);
          }
          return { guard, guardParams, target: (def.target as string | undefined) ?? null, assigns, actions };
        }),
      );
    }
    table.set(value, byEvent);
  }
  return table;
}

/** One event from (value, context): the first candidate whose guard passes, or no change. */
export function flatTransition(table: Table, value: string, context: Context, event: Event): FlatStep {
  const candidates = table.get(value)?.get(event.type);
  if (candidates) {
    for (const c of candidates) {
      if (c.guard && !c.guard({ context, event }, c.guardParams)) continue;
      let next = context;
      for (const assign of c.assigns) next = assign(next, event);
      const to = c.target ?? value;
      return { value: to, context: next, changed: to !== value || c.assigns.length > 0, actions: c.actions };
    }
  }
  return { value, context, changed: false, actions: [] };
}
