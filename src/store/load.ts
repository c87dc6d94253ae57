// Fail-closed load of the snapshot (FEATURES.md §2.7): absent → empty; unreadable/incompatible →
// refusal, file untouched; corrupt → preserved and replaced by a fresh state, under the lock only.
// Then the schema-1 migration check (§2.9), from every entry point. The journal that continues a
// snapshot is the store's business (store.ts).
import { access, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { emptyState, type State } from '../protocol/schema.ts';
import { migrateV1, migrationPending } from './migrate.ts';
import type { StorePaths } from './paths.ts';
import { readStateFile, saveState, serialize, unpin } from './state-file.ts';
import type { Pinned, SaveOptions } from './state-file.ts';

/** state.json as loaded: the state, the journal that continues it, and a pin on its inode (null
 *  when there is no file). */
export interface Snapshot {
  state: State;
  journalId: string | null;
  pin: Pinned | null;
}

async function current(paths: StorePaths): Promise<Snapshot | { corrupt: string }> {
  const r = await readStateFile(paths);
  if (r.kind === 'absent') return { state: emptyState(), journalId: null, pin: null };
  if (r.kind === 'corrupt') return { corrupt: r.cause };
  return { state: r.state, journalId: r.journalId, pin: r.pin };
}

/** Without the lock. null = this load needs the lock (corrupt file or a pending migration). */
export async function loadLockFree(paths: StorePaths): Promise<Snapshot | null> {
  const cur = await current(paths);
  if ('corrupt' in cur) return null;
  if (await migrationPending(paths, cur.pin ? cur.state : null)) {
    unpin(cur.pin);
    return null;
  }
  return cur;
}

/** Under the lock: recover, migrate, and return the snapshot every later step works on. */
export async function loadLocked(paths: StorePaths, opts: SaveOptions = {}): Promise<Snapshot> {
  const cur = await current(paths);
  let out: Snapshot = 'corrupt' in cur ? await recoverCorrupt(paths, cur.corrupt, opts) : cur;
  const migrated = await migrateV1(paths, out.pin ? out.state : null, opts);
  if (migrated) {
    unpin(out.pin);
    out = { state: migrated.state, journalId: null, pin: migrated.pin };
  }
  return out;
}

const exists = (p: string) => access(p).then(() => true, () => false);

/** A corrupt file is kept as `state.corrupt.<ms>.json` and a fresh state with one error naming it
 *  takes its place. `cause` says what was wrong. */
async function recoverCorrupt(paths: StorePaths, cause: string, opts: SaveOptions): Promise<Snapshot> {
  let at = Date.now();
  while (await exists(join(paths.dir, `state.corrupt.${at}.json`))) at++; // never overwrite an older backup
  const backup = `state.corrupt.${at}.json`;
  opts.guard?.();
  await rename(paths.state, join(paths.dir, backup));
  const state = emptyState();
  state.errors.push({
    at,
    reason: 'state_corrupt',
    message: `state.json was corrupt (${cause}); it was preserved as ${backup} and a fresh state was started.`,
  });
  return { state, journalId: null, pin: await saveState(paths, serialize(state), opts) };
}
