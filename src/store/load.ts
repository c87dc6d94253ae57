// Fail-closed load (FEATURES.md §2.7): absent → empty; unreadable/incompatible → refusal, file
// untouched; corrupt → preserved and replaced by a fresh state, under the lock only. Then the
// schema-1 migration check (§2.9), from every entry point.
import { access, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { emptyState } from '../protocol/schema.ts';
import type { State } from '../protocol/schema.ts';
import { migrateV1, migrationPending } from './migrate.ts';
import type { StorePaths } from './paths.ts';
import { readStateFile, saveState, serialize, unpin } from './state-file.ts';
import type { Pinned, SaveOptions } from './state-file.ts';

/** Where a loaded state came from; the store's cache decides what to keep from it. */
export type Loaded =
  | { from: 'absent'; state: State }
  | { from: 'cache'; state: State }
  | { from: 'disk'; state: State; pin: Pinned }
  | { from: 'saved'; state: State; pin: Pinned; text: string };

export interface LoadOptions extends SaveOptions {
  /** The fast path: a private copy of the cached state if state.json is still the cached file. */
  cached?: () => Promise<State | null>;
}

async function current(paths: StorePaths, opts: LoadOptions): Promise<Loaded | { from: 'corrupt'; cause: string }> {
  const hit = await opts.cached?.();
  if (hit) return { from: 'cache', state: hit };
  const r = await readStateFile(paths);
  if (r.kind === 'absent') return { from: 'absent', state: emptyState() };
  if (r.kind === 'corrupt') return { from: 'corrupt', cause: r.cause };
  return { from: 'disk', state: r.state, pin: r.pin };
}

/** Without the lock. null = this load needs the lock (corrupt file or a pending migration). */
export async function loadLockFree(paths: StorePaths, opts: LoadOptions = {}): Promise<Loaded | null> {
  const cur = await current(paths, opts);
  if (cur.from === 'corrupt') return null;
  if (await migrationPending(paths, cur.from === 'absent' ? null : cur.state)) {
    if (cur.from === 'disk') unpin(cur.pin);
    return null;
  }
  return cur;
}

/** Under the lock: recover, migrate, and return the state every later step works on. */
export async function loadLocked(paths: StorePaths, opts: LoadOptions = {}): Promise<Loaded> {
  const cur = await current(paths, opts);
  let out: Loaded = cur.from === 'corrupt' ? await recoverCorrupt(paths, cur.cause, opts) : cur;
  const migrated = await migrateV1(paths, out.from === 'absent' ? null : out.state, opts);
  if (migrated) {
    if (out.from === 'disk' || out.from === 'saved') unpin(out.pin);
    out = { from: 'saved', ...migrated };
  }
  return out;
}

const exists = (p: string) => access(p).then(() => true, () => false);

async function recoverCorrupt(paths: StorePaths, cause: string, opts: SaveOptions): Promise<Loaded> {
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
  const text = serialize(state);
  return { from: 'saved', state, text, pin: await saveState(paths, text, opts) };
}
