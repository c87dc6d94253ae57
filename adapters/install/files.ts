// The one write step of every installer (hosts.md "Installers"): a plan of whole-file changes computed in
// memory first, then each file written atomically (temp + fsync + rename + directory fsync); if a
// later write fails, the files already written are put back as they were (restored, or removed when
// they were new). Never a partial install. Pure planners live beside each host; this module is the
// only I/O. A config file is the user's: a symlink stays a symlink (its target is what changes) and
// the file keeps its permission bits (a 0600 file may hold another server's secret).
import { open, lstat, mkdir, readFile, readlink, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { tempName } from '../../src/store/file/atomic.ts';

/** The new content of one file, or `null` to delete it. */
export interface FileChange {
  path: string;
  content: string | null;
}

/** What a planner reads: the current text of each target, `null` when the file is absent. */
export async function readTargets(paths: string[]): Promise<Map<string, string | null>> {
  const out = new Map<string, string | null>();
  for (const p of paths) {
    try {
      out.set(p, await readFile(p, 'utf8'));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      out.set(p, null);
    }
  }
  return out;
}

export interface ApplyOps {
  write(path: string, text: string): Promise<void>;
  remove(path: string): Promise<void>;
}

/** The file a write to `path` must replace: the end of its symlink chain (a dangling link's
 *  target included), else `path` itself. */
async function writeTarget(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const link = await lstat(path).catch(() => null);
  return link?.isSymbolicLink() ? writeTarget(resolve(dirname(path), await readlink(path))) : path;
}

/** Told of each fsync (tests prove the write path makes them). */
export type SyncSeen = (what: 'file' | 'directory') => void;

async function syncDir(dir: string, seen: SyncSeen) {
  const fd = await open(dir, 'r');
  try {
    await fd.sync();
    seen('directory');
  } finally {
    await fd.close();
  }
}

/** temp file with the target's mode, fsync, rename over the target, fsync of the directory. */
async function writeDurably(path: string, text: string, seen: SyncSeen) {
  const target = await writeTarget(path);
  const mode = await stat(target).then(
    (s) => s.mode & 0o7777,
    () => undefined,
  );
  await mkdir(dirname(target), { recursive: true });
  const tmp = resolve(dirname(target), tempName('.opencomms-install'));
  const fd = await open(tmp, 'wx', mode ?? 0o666);
  try {
    if (mode !== undefined) await fd.chmod(mode); // open() applies the umask; the old mode is the rule
    await fd.writeFile(text);
    await fd.sync();
    seen('file');
    await fd.close();
    await rename(tmp, target);
  } catch (e) {
    await fd.close().catch(() => {});
    await rm(tmp, { force: true });
    throw e;
  }
  await syncDir(dirname(target), seen);
}

/** The real write step: symlinks followed, mode kept, file and directory fsynced. */
export const durableOps = (seen: SyncSeen = () => {}): ApplyOps => ({
  write: (path, text) => writeDurably(path, text, seen),
  remove: (path) => rm(path, { force: true }),
});

const realOps = durableOps();

/**
 * Applies the changes whose content differs from `before` (a no-op plan writes nothing: a second
 * run changes no byte). On the first failure every file already changed is restored, then the
 * error is rethrown. Returns the paths that changed.
 */
export async function applyChanges(
  changes: FileChange[],
  before: Map<string, string | null>,
  ops: ApplyOps = realOps,
): Promise<string[]> {
  const due = changes.filter((c) => (before.get(c.path) ?? null) !== c.content);
  const done: FileChange[] = [];
  try {
    for (const c of due) {
      if (c.content === null) await ops.remove(c.path);
      else await ops.write(c.path, c.content);
      done.push(c);
    }
  } catch (e) {
    for (const c of done.reverse()) {
      const old = before.get(c.path) ?? null;
      try {
        if (old === null) await ops.remove(c.path);
        else await ops.write(c.path, old);
      } catch {
        // best effort: the original error below is what the user must see
      }
    }
    throw e;
  }
  return due.map((c) => c.path);
}
