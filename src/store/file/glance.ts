// A look at the state without the store: state.json and the journal it names, parsed but NOT
// validated, no lock, no schema library loaded. For hot paths that only decide "nothing to do
// here" (the hook runner runs on every prompt); anything that acts goes through the Store, which
// validates. Node built-ins only. Anything it cannot read plainly is `unknown`, and the caller
// takes the full path: a glance must never miss mail.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { applyOps, type Op } from '../../protocol/draft.ts';
import { journalFile } from './journal.ts';
import { resolvePaths } from '../paths.ts';
import type { Glance } from '../types.ts';

export function glance(projectDir: string): Glance {
  const paths = resolvePaths(projectDir);
  // A project bound to another store keeps no live state here (a state.json may be a leftover).
  if (existsSync(paths.binding)) return { kind: 'unknown' };
  let text: string;
  try {
    text = readFileSync(paths.state, 'utf8');
  } catch (e) {
    // Absent with a journal beside it is a lost snapshot (load.ts refuses it): not "no mail".
    return (e as NodeJS.ErrnoException).code === 'ENOENT' && !hasJournal(paths.journal)
      ? { kind: 'absent' }
      : { kind: 'unknown' };
  }
  try {
    const state: unknown = JSON.parse(text);
    if (!state || typeof state !== 'object' || Array.isArray(state)) return { kind: 'unknown' };
    const id = (state as { journal_id?: unknown }).journal_id;
    if (id !== undefined && !replay(state, journalFile(paths, String(id)))) return { kind: 'unknown' };
    return { kind: 'state', state: state as Record<string, unknown> };
  } catch {
    return { kind: 'unknown' };
  }
}

function hasJournal(dir: string): boolean {
  try {
    return readdirSync(dir).some((n) => n.endsWith('.jsonl'));
  } catch {
    return false;
  }
}

/** Applies the journal's whole lines in order; false when its count breaks (damage: the store
 *  will say what). A missing journal is an empty one. */
function replay(state: object, file: string): boolean {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT';
  }
  let next = 1;
  const end = text.lastIndexOf('\n');
  for (const line of text.slice(0, end + 1).split('\n')) {
    if (!line) continue;
    let entry: { n?: unknown; ops?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue; // a torn line, written again whole after it
    }
    if (entry.n !== next || !Array.isArray(entry.ops)) return false;
    applyOps(state, entry.ops as Op[]);
    next++;
  }
  return true;
}
