// A look at the state without the store: the file parsed but NOT validated, no lock, no schema
// library loaded. For hot paths that only decide "nothing to do here" (the hook runner runs on
// every prompt); anything that acts goes through the Store, which validates. Node built-ins only.
// When the state is not all in state.json (a snapshot continued by a journal, `journal_id`), the
// answer is `unknown` and the caller takes the full path: a glance must never miss mail.
import { readFileSync } from 'node:fs';
import { resolvePaths } from './paths.ts';

export type Glance = { kind: 'absent' } | { kind: 'unknown' } | { kind: 'state'; state: Record<string, unknown> };

export function glance(projectDir: string): Glance {
  let text: string;
  try {
    text = readFileSync(resolvePaths(projectDir).state, 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? { kind: 'absent' } : { kind: 'unknown' };
  }
  try {
    const state: unknown = JSON.parse(text);
    if (!state || typeof state !== 'object' || Array.isArray(state) || 'journal_id' in state) return { kind: 'unknown' };
    return { kind: 'state', state: state as Record<string, unknown> };
  } catch {
    return { kind: 'unknown' };
  }
}
