// The size pre-check of spawn delivery (hosts.md "spawn_push"): on a copy of the state, without
// draining anything, which batch a drain would hand over within the argv budget.
import { drain } from './deliver.ts';
import type { State } from '../protocol/schema.ts';
import type { Env } from './types.ts';

export type SpawnPreview =
  /** A batch of `count` envelopes fits the budget. */
  | { kind: 'fits'; count: number }
  /** The first envelope a drain would take is larger than the whole budget: it can never be spawned. */
  | { kind: 'too_large'; message_id: string }
  /** Nothing would leave now (held, cooling, empty): the real drain records why. */
  | { kind: 'none' };

const promptOf = (state: State, rid: string, env: Env, maxSize?: number) =>
  drain(structuredClone(state), rid, env, maxSize === undefined ? {} : { maxSize }).effects.find(
    (e) => e.type === 'Prompt',
  );

export function spawnPreview(state: Readonly<State>, rid: string, env: Env, maxSize: number): SpawnPreview {
  const within = promptOf(state as State, rid, env, maxSize);
  if (within?.type === 'Prompt') return { kind: 'fits', count: within.message_ids.length };
  const any = promptOf(state as State, rid, env);
  return any?.type === 'Prompt' ? { kind: 'too_large', message_id: any.message_ids[0]! } : { kind: 'none' };
}
