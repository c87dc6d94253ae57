// Byte-level snapshots of a directory tree: what a refused call or an attack must leave unchanged.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Every path under `root` (relative, sorted) → sha256 of its bytes, or `dir/` for a directory.
 *  `skip` leaves out paths before they are read: files another process creates and removes while
 *  the tree is walked (lock tokens) would otherwise vanish between the listing and the read. */
export function snapshotTree(root: string, skip: (rel: string) => boolean = () => false): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      return; // the root does not exist: an empty snapshot
    }
    for (const name of names) {
      const p = join(dir, name);
      const rel = relative(root, p);
      if (skip(rel)) continue;
      if (statSync(p).isDirectory()) {
        out[`${rel}/`] = 'dir/';
        walk(p);
      } else out[rel] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(root);
  return out;
}
