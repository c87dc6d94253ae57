// The identity of one version of a file (state.json): what a process compares to know whether
// the file it read is still the one on disk.
import { statSync, type BigIntStats } from 'node:fs';

/** Identity of one version of state.json. Every save renames a new inode into place, so a changed
 *  ino means another writer; size/mtime/ctime catch an in-place edit by something else. One list
 *  for the key, its comparison and the compaction seal that carries it (journal.ts). */
export const FILE_KEY_FIELDS = ['dev', 'ino', 'size', 'mtimeNs', 'ctimeNs'] as const;
export type FileKey = Record<(typeof FILE_KEY_FIELDS)[number], bigint>;

export function keyOf(s: BigIntStats): FileKey {
  const key = {} as FileKey;
  for (const f of FILE_KEY_FIELDS) key[f] = s[f];
  return key;
}
export const sameKey = (a: FileKey, b: FileKey) => FILE_KEY_FIELDS.every((f) => a[f] === b[f]);

/** Synchronous on purpose: it runs on every call, and a thread-pool hop costs more than the stat. */
export function statKey(file: string): FileKey | null {
  try {
    return keyOf(statSync(file, { bigint: true }));
  } catch {
    return null;
  }
}
