// The one write step of every installer (FEATURES.md §8.1): a plan of whole-file changes computed in
// memory first, then each file written atomically (temp + fsync + rename); if a later write fails,
// the files already written are put back as they were (restored, or removed when they were new).
// Never a partial install. Pure planners live beside each host; this module is the only I/O.
import { mkdir, readFile, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { writeAtomic } from '../../src/store/index.ts';

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

const realOps: ApplyOps = {
  async write(path, text) {
    await mkdir(dirname(path), { recursive: true });
    await writeAtomic(path, text, { tmpPrefix: '.opencomms-install' });
  },
  remove: (path) => rm(path, { force: true }),
};

/**
 * Applies the changes whose content differs from `before` (a no-op plan writes nothing: a second
 * run changes no byte). On the first failure every file already changed is restored, then the
 * error is rethrown. Returns the paths that changed.
 */
export async function applyChanges(changes: FileChange[], before: Map<string, string | null>, ops: ApplyOps = realOps): Promise<string[]> {
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
