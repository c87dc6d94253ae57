// The store's files as doctor sees them (protocol.md "State files"; operator.md "Command line"): state load without recovering
// anything, corrupt backups, the migration marker, the lock and temp-file leftovers. Doctor
// diagnoses the embedded file store, so it is the one operator tool that names its files; it
// never changes them except through the fixes of `doctor --fix` (doctor.ts; operator.md "Command line").
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { LOCK_STALE_MS } from '../protocol/limits.ts';
import { inspectState, resolvePaths, TEMP_NAME_RE, type Inspection, type StorePaths } from '../store/index.ts';
import { pidAlive } from '../store/pid.ts';

export type Level = 'OK' | 'WARN' | 'FAIL';
export interface Row {
  level: Level;
  check: string;
  detail: string;
}
export const row = (level: Level, check: string, detail: string): Row => ({ level, check, detail });

/** Doctor never prints a member id in full (operator.md "Command line"): the first SHORT_ID_CHARS and `...`. */
const SHORT_ID_CHARS = 12;
export const shortId = (id: string) => (id.length > SHORT_ID_CHARS ? `${id.slice(0, SHORT_ID_CHARS)}...` : id);

export type StateLoad = Inspection;

/** Loads the state the way every load does (state.json and its journal), but recovers nothing:
 *  damage is reported, not replaced (the next operation preserves and replaces it, protocol.md "Loading (fail-closed)"). */
export const loadState = (paths: StorePaths): Promise<StateLoad> => inspectState(paths.project);

export async function migrationMarker(project: string): Promise<string | null> {
  try {
    const m = JSON.parse(await readFile(resolvePaths(project).marker, 'utf8')) as { migrated_at?: unknown };
    return typeof m.migrated_at === 'number' ? new Date(m.migrated_at).toISOString() : 'an unknown time';
  } catch {
    return null;
  }
}

export const legacyStatePresent = (paths: StorePaths) => existsSync(paths.legacyState);

async function names(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

export const corruptBackups = async (paths: StorePaths) =>
  (await names(paths.dir)).filter((n) => /^state\.corrupt\.\d+\.json$/.test(n)).sort();

/** Journals the store set aside as damaged (`journal/<id>.corrupt.<ms>.jsonl`): they may hold the
 *  only copy of acknowledged changes, so they stay until the operator has looked at them. */
export const corruptJournals = async (paths: StorePaths) =>
  (await names(paths.journal))
    .filter((n) => /\.corrupt\.\d+\.jsonl$/.test(n))
    .sort()
    .map((n) => `journal/${n}`);

/** A directory the store writes to that refuses a new file, with the error's code. */
export interface Unwritable {
  dir: string;
  code: string;
}

/** Whether the store can create files where it writes: one probe file per existing directory,
 *  created exclusively under a temp-file name (so an interrupted probe is a temp file --fix
 *  removes) and removed at once. Nothing else is touched. Without `.opencomms/` the project
 *  directory is probed, where the first write creates it. */
export async function unwritableDirs(paths: StorePaths): Promise<Unwritable[]> {
  const dirs = existsSync(paths.dir)
    ? [paths.dir, paths.journal, paths.history, paths.archives, paths.pins].filter((d) => existsSync(d))
    : [paths.project];
  const out: Unwritable[] = [];
  for (const dir of dirs) {
    const probe = join(dir, `.probe.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      await (await open(probe, 'wx')).close();
      await unlink(probe);
    } catch (e) {
      out.push({ dir, code: (e as NodeJS.ErrnoException).code ?? 'EIO' });
    }
  }
  return out;
}

/** The lock's age, or null when nobody holds it. A holder refreshes it every second, so a lock
 *  older than LOCK_STALE_MS belongs to a process that died or hangs. */
export async function lockAge(paths: StorePaths, now: number): Promise<number | null> {
  try {
    return now - (await stat(paths.lock)).mtimeMs;
  } catch {
    return null;
  }
}
export const isStaleLock = (age: number | null) => age !== null && age > LOCK_STALE_MS;

/** Temp files of atomic saves (`<prefix>.<pid>.<8 hex>.tmp`, protocol.md "State files") left behind by a process that
 *  is gone; a live writer's temp file is its save in progress. */
export interface TempFile {
  file: string;
  pid: number;
  alive: boolean;
}

export async function tempFiles(paths: StorePaths): Promise<TempFile[]> {
  const out: TempFile[] = [];
  for (const dir of [paths.dir, paths.journal, paths.history, paths.archives, paths.pins]) {
    for (const n of await names(dir)) {
      const m = TEMP_NAME_RE.exec(n);
      if (!m) continue;
      const pid = Number(m[1]);
      out.push({ file: join(dir, n), pid, alive: pidAlive(pid) });
    }
  }
  return out;
}
