// Worktree spellings (protocol.md "OpenCode plugin"): every adapter hands the engine one normalised absolute
// path, so the engine's plain string comparison is the "same worktree" rule.
import { realpathSync } from 'node:fs';
import { resolve, sep } from 'node:path';

/** Resolved, absolute, the real path when it exists, no trailing separator, case-folded on win32. */
export function normaliseWorktree(p: string, platform: NodeJS.Platform = process.platform): string {
  let out = resolve(p);
  try {
    out = realpathSync(out);
  } catch {
    // not there (yet): the resolved spelling is the best there is
  }
  if (out.length > 1 && out.endsWith(sep)) out = out.slice(0, -1);
  return platform === 'win32' ? out.toLowerCase() : out;
}
