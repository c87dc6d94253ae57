// Fail-closed load of the snapshot (protocol.md "Loading (fail-closed)"): absent → empty, unless a journal says there
// was one (lost → refusal, journal untouched); unreadable/incompatible → refusal, file untouched;
// corrupt → copied aside and replaced by a fresh state, under the lock only.
// Then the schema-1 migration check (protocol.md "Loading (fail-closed)"), from every entry point. The journal that continues a
// snapshot is the store's business (store.ts).
import { readdirSync, statSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { refuse, RefusalError } from '../../protocol/result.ts';
import { writeAtomic } from './atomic.ts';
import { storeFs } from './fs.ts';
import { emptyState, type State } from '../../protocol/schema.ts';
import { migrateV1, migrationPending } from './migrate.ts';
import type { StorePaths } from '../paths.ts';
import { readStateFile, saveState, serialize, unpin } from './state-file.ts';
import type { Pinned, SaveOptions } from './state-file.ts';

/** state.json as loaded: the state, the journal that continues it, and a pin on its inode (null
 *  when there is no file). */
export interface Snapshot {
  state: State;
  journalId: string | null;
  /** The journal was created before the snapshot: if it is absent, it was lost. */
  journalCreated: boolean;
  pin: Pinned | null;
}

async function current(paths: StorePaths): Promise<Snapshot | { corrupt: string; text: Buffer }> {
  const r = await readStateFile(paths);
  if (r.kind === 'absent') {
    const lost = lostSnapshot(paths);
    if (lost) throw new RefusalError(refuse('state_unreadable', `${lost}. Nothing was changed.`, { code: 'ENOENT' }));
    return { state: emptyState(), journalId: null, journalCreated: false, pin: null };
  }
  if (r.kind === 'corrupt') return { corrupt: r.cause, text: r.text };
  return { state: r.state, journalId: r.journalId, journalCreated: r.journalCreated, pin: r.pin };
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
  let out: Snapshot = 'corrupt' in cur ? await recoverCorrupt(paths, cur.corrupt, cur.text, opts) : cur;
  const migrated = await migrateV1(paths, out.pin ? out.state : null, opts);
  if (migrated) {
    unpin(out.pin);
    out = { state: migrated.state, journalId: null, journalCreated: false, pin: migrated.pin };
  }
  return out;
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

/** state.json is absent, yet a journal holds lines: a snapshot existed and is lost (a journal is
 *  only ever written after the snapshot it continues). What to say, or null when nothing says a
 *  snapshot existed. Loading an empty state here would answer every call from nothing, and the
 *  next write would delete the journal: the project is refused until the operator acts. */
export function lostSnapshot(paths: StorePaths): string | null {
  let names: string[];
  try {
    names = readdirSync(paths.journal);
  } catch {
    return null;
  }
  const held = names.filter(
    (n) =>
      /^[0-9a-f]{16}\.jsonl$/.test(n) && (statSync(join(paths.journal, n), { throwIfNoEntry: false })?.size ?? 0) > 0,
  );
  if (!held.length) return null;
  return `.opencomms/state.json is missing, but the journal that continued it is there (${held.map((n) => `journal/${n}`).join(', ')}): put state.json back from a backup; or, to start the project empty, move the journal/ folder aside`;
}

/** A corrupt file is copied to `state.corrupt.<ms>.json`, the journals that continued it are
 *  renamed `<id>.corrupt.<ms>.jsonl` (no compaction removes those), and a fresh state with one
 *  error naming them takes its place. The copy is written before anything is replaced: at no
 *  moment is the only copy of the old bytes gone. `cause` says what was wrong. */
async function recoverCorrupt(paths: StorePaths, cause: string, text: Buffer, opts: SaveOptions): Promise<Snapshot> {
  let at = Date.now();
  while (await exists(join(paths.dir, `state.corrupt.${at}.json`))) at++; // never overwrite an older backup
  const backup = `state.corrupt.${at}.json`;
  opts.guard?.();
  await writeAtomic(join(paths.dir, backup), text, { tmpPrefix: '.state', durable: opts.durable });
  const journals = journalNames(paths).map((n) => [n, `${n.slice(0, -'.jsonl'.length)}.corrupt.${at}.jsonl`] as const);
  const state = emptyState();
  const kept = journals.length ? ` (and its journal as ${journals.map(([, to]) => `journal/${to}`).join(', ')})` : '';
  state.errors.push({
    at,
    reason: 'state_corrupt',
    message: `state.json was corrupt (${cause}); it was preserved as ${backup}${kept} and a fresh state was started.`,
  });
  // The journals first: once the fresh state is there, the next compaction removes every
  // journal it does not name. Until then a reader still finds the corrupt file and waits here.
  for (const [from, to] of journals) storeFs.renameSync(join(paths.journal, from), join(paths.journal, to));
  const pin = await saveState(paths, serialize(state), opts);
  return { state, journalId: null, journalCreated: false, pin };
}

const journalNames = (paths: StorePaths): string[] => {
  try {
    return readdirSync(paths.journal).filter((n) => /^[0-9a-f]{16}\.jsonl$/.test(n));
  } catch {
    return [];
  }
};
