// Outcome constructors: a refusal changes nothing on disk; success reports a change.
import type { Refusal, ToolResult } from '../protocol/result.ts';
import type { State } from '../protocol/schema.ts';
import type { Effect, Outcome, Writes } from './types.ts';

export const refused = (state: State, refusal: Refusal): Outcome =>
  ({ state, result: refusal, effects: [], changed: false }) as Outcome;

export const done = <D extends object>(
  state: State,
  result: ToolResult<D>,
  effects: Effect[] = [],
  writes?: Writes,
  changed = true,
): Outcome => ({ state, result: result as ToolResult, effects, changed, ...(writes ? { writes } : {}) });

/** A read: answers without changing state. */
export const answered = <D extends object>(state: State, result: ToolResult<D>): Outcome =>
  done(state, result, [], undefined, false);
