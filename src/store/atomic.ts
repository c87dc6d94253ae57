// Temp-file-and-rename save (FEATURES.md §2.10): readers see the old file or the new one, never half.
// The happy path is synchronous: a small write + fsync + rename costs ~0.1 ms of thread-pool hops
// per call when async, which was most of a mutation's latency; only the retry waits are async.
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RENAME_RETRY_DELAYS_MS } from '../protocol/limits.ts';

export interface AtomicFsOps {
  rename(from: string, to: string): void;
}
const realFs: AtomicFsOps = { rename: renameSync };

export interface WriteAtomicOptions {
  /** `.state`, `.arch`, `.pin`: the temp file is `<prefix>.<pid>.<8 hex>.tmp` next to the target. */
  tmpPrefix: string;
  /** Injected by tests to make rename fail. */
  fsOps?: AtomicFsOps;
  /** Runs before every rename attempt; throwing aborts the save (a lost lock must not write). */
  guard?: () => void;
}

export const tempName = (prefix: string) => `${prefix}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;

export async function writeAtomic(file: string, text: string, opts: WriteAtomicOptions): Promise<void> {
  const tmp = join(dirname(file), tempName(opts.tmpPrefix));
  const fsOps = opts.fsOps ?? realFs;
  try {
    const fd = openSync(tmp, 'wx');
    try {
      writeSync(fd, text);
      fsyncSync(fd); // the rename must never expose a file whose bytes are still only in cache
    } finally {
      closeSync(fd);
    }
    let lastError: unknown;
    for (const delay of RENAME_RETRY_DELAYS_MS) {
      if (delay > 0) await sleep(delay);
      opts.guard?.();
      try {
        fsOps.rename(tmp, file);
        return;
      } catch (e) {
        lastError = e; // transient EBUSY/EPERM (Windows, network file systems): try again
      }
    }
    throw lastError;
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      // never created, or already renamed away
    }
    throw e;
  }
}
