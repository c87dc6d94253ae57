// Where every file of the store lives. One place, so no module builds a path of its own.
import { mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

export interface StorePaths {
  project: string;
  dir: string;
  state: string;
  lock: string;
  legacyDir: string;
  legacyState: string;
  marker: string;
  v1Backup: string;
  v2EmptyBackup: string;
  pins: string;
  legacyPin: string;
  archives: string;
  history: string;
  journal: string;
  /** Which store holds the project when it is not these files (store/binding.ts). */
  binding: string;
}

export const STORE_DIR = '.opencomms';
/** The schema-1 product's directory and the host label its migrated rows get (protocol.md "Host labels", "Loading (fail-closed)"). The only
 *  place the store names it: the core-names-no-host grep has to allow exactly these two. */
export const LEGACY_DIR = '.opencode-comms';
export const LEGACY_HOST = 'opencode-comms';

export function resolvePaths(projectDir: string): StorePaths {
  const project = resolve(projectDir);
  const dir = join(project, STORE_DIR);
  const legacyDir = join(project, LEGACY_DIR);
  return {
    project,
    dir,
    state: join(dir, 'state.json'),
    lock: join(dir, '.state.lock'),
    legacyDir,
    legacyState: join(legacyDir, 'state.json'),
    marker: join(dir, 'MIGRATED_FROM_V1'),
    v1Backup: join(dir, 'state.v1.bak.json'),
    v2EmptyBackup: join(dir, 'state.v2.empty.bak.json'),
    pins: join(dir, 'pins'),
    legacyPin: join(dir, 'member-pin.json'),
    archives: join(dir, 'archives'),
    history: join(dir, 'history'),
    journal: join(dir, 'journal'),
    binding: join(dir, 'store.json'),
  };
}

/** Creates `.opencomms/`; the `.gitignore` is written only by whoever created the directory, so a
 *  user who edits or deletes it later is not overridden. */
export async function ensureDir(paths: StorePaths): Promise<void> {
  // Synchronous: it runs before every mutation, and an existing directory costs one syscall.
  const created = mkdirSync(paths.dir, { recursive: true });
  if (created === undefined) return;
  await writeFile(join(paths.dir, '.gitignore'), '*\n', { flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') throw e;
  });
}
