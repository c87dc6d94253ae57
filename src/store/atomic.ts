// Temp-file-and-rename save (FEATURES.md §2.10): readers see the old file or the new one, never half.
import { randomBytes } from 'node:crypto';
import { open, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RENAME_RETRY_DELAYS_MS } from '../protocol/limits.ts';

export interface AtomicFsOps {
  rename(from: string, to: string): Promise<void>;
}
const realFs: AtomicFsOps = { rename };

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
    const fh = await open(tmp, 'wx');
    try {
      await fh.writeFile(text);
      await fh.sync(); // the rename must never expose a file whose bytes are still only in cache
    } finally {
      await fh.close();
    }
    let lastError: unknown;
    for (const delay of RENAME_RETRY_DELAYS_MS) {
      if (delay > 0) await sleep(delay);
      opts.guard?.();
      try {
        await fsOps.rename(tmp, file);
        return;
      } catch (e) {
        lastError = e; // transient EBUSY/EPERM (Windows, network file systems): try again
      }
    }
    throw lastError;
  } catch (e) {
    await unlink(tmp).catch(() => {});
    throw e;
  }
}
