// A worktree as the engine compares it (FEATURES.md §6.5): absolute, with symlinks resolved, so
// spellings of one directory match. A path that does not exist yet keeps its resolved spelling.
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';

export function normaliseWorktree(dir: string): string {
  try {
    return realpathSync(resolve(dir));
  } catch {
    return resolve(dir);
  }
}
