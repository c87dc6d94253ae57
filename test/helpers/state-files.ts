// A project's state as any process would load it (state.json plus the journal it names), read
// synchronously for assertions, and an operator's edit of it written the way an outside editor
// would: a whole new state.json (with no journal), by temp file and rename.
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyOps, type Op } from '../../src/protocol/draft.ts';
import type { State } from '../../src/protocol/schema.ts';

export function readStateSync(project: string): State & Record<string, unknown> {
  const dir = join(project, '.opencomms');
  const snap = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as State & { journal_id?: string };
  const id = snap.journal_id;
  delete snap.journal_id;
  if (id) {
    let text = '';
    try {
      text = readFileSync(join(dir, 'journal', `${id}.jsonl`), 'utf8');
    } catch {
      // no entry yet
    }
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        applyOps(snap, (JSON.parse(line) as { ops: Op[] }).ops);
      } catch {
        // a torn line
      }
    }
  }
  return snap as State & Record<string, unknown>;
}

export function editStateSync(project: string, fn: (s: State & Record<string, unknown>) => void): void {
  const s = readStateSync(project);
  fn(s);
  const file = join(project, '.opencomms', 'state.json');
  const tmp = join(project, '.opencomms', `operator-edit.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(s, null, 2)}\n`);
  renameSync(tmp, file);
}

/** The bytes of every state file (state.json and the journals), for "nothing was written" checks. */
export function stateBytes(project: string): string {
  const dir = join(project, '.opencomms');
  const parts = [readFileSync(join(dir, 'state.json'), 'utf8')];
  let journals: string[] = [];
  try {
    journals = readdirSync(join(dir, 'journal')).sort();
  } catch {
    // none yet
  }
  for (const f of journals) parts.push(`${f}\n${readFileSync(join(dir, 'journal', f), 'utf8')}`);
  return parts.join('\n---\n');
}
