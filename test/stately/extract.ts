// What Stately's own parser reads from a machine file, and what the runtime runs, in one shape:
// states (with final and initial), and per state and event the ordered transitions with their
// target, guard name and actions. `@xstate/machine-extractor` is the parser Stately's editor and VS
// Code extension use; the runtime side is the graph `@xstate/graph` builds from `machines/`.
import { createRequire } from 'node:module';
import { toDirectedGraph, type DirectedGraphNode } from '@xstate/graph';
import type { AnyStateMachine } from 'xstate';

export interface Transition {
  source: string;
  event: string;
  /** The state the transition moves to; the source itself for a transition without a target. */
  target: string;
  guard: string | null;
  actions: { type: string; params?: unknown }[];
}

export interface MachineShape {
  id: string;
  initial: string;
  states: { key: string; final: boolean }[];
  transitions: Transition[];
}

const require = createRequire(import.meta.url);

/** The part of the parser's API used here (its own typings are written against XState 4's). */
interface Extractor {
  extractMachinesFromFile(source: string): { machines: ({ toConfig(): ParsedNode | null } | undefined)[] } | null;
}

/**
 * The parser 0.16.0 requires `xstate/lib/actions` and `xstate/lib/types` at load: XState 4 paths
 * (its peer is `xstate@^4`). The project runs XState 5, so the lockfile holds XState 4 as
 * `xstate-v4` and only the parser's own requests of `xstate/lib/*` are sent there.
 */
function loadExtractor(): Extractor {
  const Module = require('node:module') as {
    _resolveFilename: (request: string, parent: { filename?: string } | undefined, ...rest: unknown[]) => string;
  };
  const original = Module._resolveFilename;
  Module._resolveFilename = function (request, parent, ...rest) {
    const fromParser = parent?.filename?.includes('@xstate/machine-extractor') ?? false;
    const mapped = fromParser && request.startsWith('xstate/lib/') ? `xstate-v4/${request.slice(7)}` : request;
    return original.call(this, mapped, parent, ...rest);
  };
  try {
    return require('@xstate/machine-extractor') as Extractor;
  } finally {
    Module._resolveFilename = original;
  }
}

export const extractor = loadExtractor();

type Named = { type?: string; params?: unknown; kind?: string; action?: { type: string; params?: unknown } };
const list = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const nonEmpty = (p: unknown) =>
  p !== undefined && p !== null && typeof p === 'object' && Object.keys(p).length > 0 ? { params: p } : {};

/** One action as the parser reports it (`{kind: 'named', action: {type, params}}`) or as XState 5 keeps it. */
function actionOf(a: Named | string): { type: string; params?: unknown } {
  if (typeof a === 'string') return { type: a };
  const inner = a.kind === 'named' && a.action ? a.action : a;
  return { type: String(inner.type), ...nonEmpty(inner.params) };
}

interface ParsedTransition {
  target?: string;
  cond?: { type?: string };
  actions?: Named | Named[];
}
interface ParsedNode {
  id?: string;
  initial?: string;
  type?: string;
  states?: Record<string, ParsedNode>;
  on?: Record<string, ParsedTransition | ParsedTransition[]>;
}

/** The shape of one machine config the parser returned (`toConfig()`); targets are sibling keys. */
export function shapeOfParsed(config: ParsedNode): MachineShape {
  const states = Object.entries(config.states ?? {});
  return {
    id: String(config.id),
    initial: String(config.initial),
    states: states.map(([key, s]) => ({ key, final: s.type === 'final' })),
    transitions: states.flatMap(([source, s]) =>
      Object.entries(s.on ?? {}).flatMap(([event, ts]) =>
        list(ts).map((t) => ({
          source,
          event,
          target: t.target === undefined ? source : t.target.replace(/^\./, ''),
          guard: t.cond?.type ?? null,
          actions: list(t.actions).map(actionOf),
        })),
      ),
    ),
  };
}

const keyOf = (node: { key: string }) => node.key;
const guardName = (g: unknown) =>
  g === undefined ? null : typeof g === 'string' ? g : String((g as { type?: string }).type ?? 'inline');

/** The same shape from the runtime machine, read edge by edge from `toDirectedGraph`. */
export function shapeOfRuntime(machine: AnyStateMachine): MachineShape {
  const graph = toDirectedGraph(machine);
  const children: DirectedGraphNode[] = graph.children;
  return {
    id: machine.id,
    initial: String((machine.root.initial?.target[0] as { key: string } | undefined)?.key),
    states: children.map((c) => ({ key: keyOf(c.stateNode), final: c.stateNode.type === 'final' })),
    transitions: children.flatMap((c) =>
      c.edges.map((e) => ({
        source: keyOf(e.source),
        event: e.transition.eventType,
        target: keyOf(e.target),
        guard: guardName(e.transition.guard),
        actions: (e.transition.actions as (Named | string)[]).map(actionOf),
      })),
    ),
  };
}
