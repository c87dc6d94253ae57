// Temp-file-and-rename save (protocol.md "Writing"): readers see the old file or the new one, never half.
// The happy path is synchronous: thread-pool hops cost more than a small write and rename; only
// the retry waits are async.
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RENAME_RETRY_DELAYS_MS } from '../../protocol/limits.ts';
import { storeFs, syncDir, writeAll } from './fs.ts';

export interface WriteAtomicOptions {
  /** `.state`, `.arch`, `.pin`: the temp file is `<prefix>.<pid>.<8 hex>.tmp` next to the target. */
  tmpPrefix: string;
  /** Runs before every rename attempt; throwing aborts the save (a lost lock must not write). */
  guard?: () => void;
  /** Survive power loss, not only a killed process: fsync the file before the rename and the
   *  directory after it. Without it the rename alone keeps readers from ever seeing half a file. */
  durable?: boolean;
  /** Waits before each rename attempt (default RENAME_RETRY_DELAYS_MS). */
  delays?: readonly number[];
}

/** A text given in pieces is written this many characters at a time: the pieces are never
 *  whole in memory, and a write is still large enough that its syscall is cheap beside it. */
const WRITE_BATCH_CHARS = 64 * 1024;

function writeText(fd: number, text: string | Buffer | Iterable<string>) {
  if (typeof text === 'string' || Buffer.isBuffer(text)) {
    writeAll(fd, typeof text === 'string' ? Buffer.from(text) : text);
    return;
  }
  let batch: string[] = [];
  let size = 0;
  for (const piece of text) {
    batch.push(piece);
    size += piece.length;
    if (size >= WRITE_BATCH_CHARS) {
      writeAll(fd, Buffer.from(batch.join('')));
      batch = [];
      size = 0;
    }
  }
  if (batch.length) writeAll(fd, Buffer.from(batch.join('')));
}

/** A temp file's name as `tempName` makes it; group 1 is the writer's PID. */
export const TEMP_NAME_RE = /^\.[A-Za-z-]+\.(\d+)\.[0-9a-f]{8}\.tmp$/;
export const tempName = (prefix: string) => `${prefix}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;

/** One attempt, synchronously (no await, so nothing else of this process runs in between);
 *  throws when the rename fails, after removing the temp file. */
export function writeAtomicSync(
  file: string,
  text: string | Buffer | Iterable<string>,
  opts: WriteAtomicOptions,
): void {
  const tmp = join(dirname(file), tempName(opts.tmpPrefix));
  try {
    const fd = storeFs.openSync(tmp, 'wx');
    try {
      writeText(fd, text);
      if (opts.durable) storeFs.fsyncSync(fd);
    } finally {
      storeFs.closeSync(fd);
    }
    opts.guard?.();
    storeFs.renameSync(tmp, file);
  } catch (e) {
    try {
      storeFs.unlinkSync(tmp);
    } catch {
      // never created, or already renamed away
    }
    throw e;
  }
  if (opts.durable) syncRenamed(file);
}

/** After the rename every reader sees the new file, whole (its bytes were synced before): the
 *  save happened, and is not reported as failed. A directory whose fsync fails leaves only the
 *  rename's survival of a power loss in doubt. */
function syncRenamed(file: string) {
  try {
    syncDir(dirname(file));
  } catch {
    // see above
  }
}

export async function writeAtomic(file: string, text: string | Buffer, opts: WriteAtomicOptions): Promise<void> {
  const tmp = join(dirname(file), tempName(opts.tmpPrefix));
  try {
    const fd = storeFs.openSync(tmp, 'wx');
    try {
      writeText(fd, text);
      if (opts.durable) storeFs.fsyncSync(fd); // the rename must never expose bytes that are only in cache
    } finally {
      storeFs.closeSync(fd);
    }
    let lastError: unknown;
    for (const delay of opts.delays ?? RENAME_RETRY_DELAYS_MS) {
      if (delay > 0) await sleep(delay);
      opts.guard?.();
      try {
        storeFs.renameSync(tmp, file);
        if (opts.durable) syncRenamed(file);
        return;
      } catch (e) {
        lastError = e; // transient EBUSY/EPERM (Windows, network file systems): try again
      }
    }
    throw lastError;
  } catch (e) {
    try {
      storeFs.unlinkSync(tmp);
    } catch {
      // never created, or already renamed away
    }
    throw e;
  }
}
