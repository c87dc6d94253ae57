// The file-system calls of the store's write path, in one object: production calls node:fs through
// it (one property load per call), and the fault-injection tests replace its members to record
// every call an operation makes and to fail any one of them (test/store/faults.test.ts).
//
// `writeAll` is the only way the store writes bytes: a write() may write fewer bytes than asked
// (a full disk writes what fits, then fails), and bytes that did not all reach the file are an
// error, never a success.
import {
  closeSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';

export const storeFs = {
  openSync,
  closeSync,
  writeSync,
  fsyncSync,
  ftruncateSync,
  renameSync,
  unlinkSync,
  mkdirSync,
  readSync,
  fstatSync,
};
export type StoreFs = typeof storeFs;

/** Closes a descriptor whose writes are done and checked (or never happened): a close that
 *  reports an error then changes nothing a reader sees, and must not fail an operation that
 *  already happened. Linux releases the descriptor either way. */
export function closeQuietly(fd: number): void {
  try {
    storeFs.closeSync(fd);
  } catch {
    // see above
  }
}

/** Makes a rename, a creation or a removal in `dir` durable. */
export function syncDir(dir: string): void {
  const fd = storeFs.openSync(dir, 'r');
  try {
    storeFs.fsyncSync(fd);
  } finally {
    closeQuietly(fd);
  }
}

/** mkdir -p; at `durable`, the new directory's name is synced into its parent (an fsync of a
 *  file inside it does not make the directory itself survive a power loss). */
export function makeDir(dir: string, durable: boolean): void {
  const first = storeFs.mkdirSync(dir, { recursive: true });
  if (first === undefined || !durable) return;
  for (let d = dir; ; d = dirname(d)) {
    syncDir(dirname(d));
    if (d === first) return;
  }
}

/** Opens a file for appending, creating it if absent; at `durable`, a file it created has its
 *  name synced into the directory (its own fsync keeps its bytes, not its name). */
export function openAppend(file: string, durable: boolean): number {
  if (!durable) return storeFs.openSync(file, 'a+'); // one call: whether it was created does not matter here
  try {
    const fd = storeFs.openSync(file, 'ax+');
    if (durable) syncDir(dirname(file));
    return fd;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return storeFs.openSync(file, 'a+');
  }
}

/** Thrown when a write moved no bytes: the file system took nothing (it reports no error code). */
const stalled = () => Object.assign(new Error('write wrote 0 bytes'), { code: 'EIO' });

/** Writes every byte of `bytes` at the descriptor's position, calling write() again for the rest
 *  of a short write; throws what the file system throws (ENOSPC when the rest does not fit). */
export function writeAll(fd: number, bytes: Uint8Array): void {
  let done = storeFs.writeSync(fd, bytes);
  while (done < bytes.length) {
    const n = storeFs.writeSync(fd, bytes, done, bytes.length - done);
    if (n <= 0) throw stalled();
    done += n;
  }
}

/** The store cannot write: a full disk, a read-only file system, an I/O error. Whatever it was
 *  writing was taken back (or never named by anything a reader follows), so the operation left
 *  no trace. `code` is the file system's (ENOSPC, EROFS, EIO, ...). */
export class StoreWriteError extends Error {
  constructor(
    readonly code: string,
    readonly what: string,
    cause: unknown,
  ) {
    super(`the store could not write ${what} (${code}); nothing was changed`, { cause });
  }
}

/** The file system's error code of a thrown value ('EIO' when it has none). */
export const codeOf = (e: unknown): string => (e as NodeJS.ErrnoException)?.code ?? 'EIO';
