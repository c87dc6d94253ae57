// Cross-process lock on `.opencomms/.state.lock` (FEATURES.md §2.10; stack.md §5).
// proper-lockfile makes the lock a directory (mkdir is atomic) and refreshes its mtime while held;
// we call it with retries:0 in our own loop so the 5000 ms deadline is exact.
import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdir, mkdirSync, realpath, realpathSync, rmdir, rmdirSync, stat, statSync, utimes, utimesSync } from 'node:fs';
import lockfile from 'proper-lockfile';
import {
  LOCK_RETRY_MAX_MS, LOCK_STALE_MS, LOCK_TIMEOUT_MS, LOCK_UPDATE_MS,
} from '../protocol/limits.ts';
import { RefusalError, refuse } from '../protocol/result.ts';
import type { StorePaths } from './paths.ts';

export interface HeldLock {
  /** Set when another process broke our lock (we were blocked longer than the stale window). */
  readonly compromised: Error | null;
  /** Throws when the lock was lost: call before any write that relies on it. */
  assertHeld(): void;
}

const LOCK_RETRY_MIN_MS = 2;

/** Plain node:fs for the lock instead of proper-lockfile's default graceful-fs: EMFILE must
 *  surface at once (FEATURES.md §2.10), not be retried behind our back, and the synchronous
 *  attempt copies this small object per call instead of graceful-fs's whole surface. */
const LOCK_FS = { mkdir, mkdirSync, realpath, realpathSync, stat, statSync, rmdir, rmdirSync, utimes, utimesSync };

export const stateBusy = () =>
  new RefusalError(
    refuse('state_busy', `State lock not acquired within ${LOCK_TIMEOUT_MS} ms; another process is writing. Retry shortly.`),
  );

/** In-process FIFO per lock path: callers of one process queue here instead of polling the mkdir
 *  lock against each other (which is unfair and burns the retry budget). */
const queues = new Map<string, Promise<void>>();
/** Locks held by the current async call chain; `active` goes false on release so that a timer
 *  created while holding does not look nested later. */
const heldHere = new AsyncLocalStorage<{ path: string; active: boolean }[]>();

export interface LockOptions {
  timeoutMs?: number;
}

export async function withLock<T>(
  paths: Pick<StorePaths, 'state' | 'lock'>,
  fn: (lock: HeldLock) => Promise<T>,
  opts: LockOptions = {},
): Promise<T> {
  const outer = heldHere.getStore() ?? [];
  if (outer.some((h) => h.active && h.path === paths.lock))
    throw new Error(`nested acquisition of ${paths.lock}: a mutation may not start another one (programming error)`);
  // The deadline covers the in-process queue too: a stuck foreign holder fails every waiter at ~5 s.
  const deadline = Date.now() + (opts.timeoutMs ?? LOCK_TIMEOUT_MS);

  const prev = queues.get(paths.lock) ?? Promise.resolve();
  let leave!: () => void;
  const gate = new Promise<void>((r) => (leave = r));
  const mine = prev.then(() => gate);
  queues.set(paths.lock, mine);
  try {
    await prev;
    const handle = await acquire(paths, deadline);
    const entry = { path: paths.lock, active: true };
    try {
      return await heldHere.run([...outer, entry], () => fn(handle));
    } finally {
      entry.active = false;
      await handle.release();
    }
  } finally {
    leave();
    if (queues.get(paths.lock) === mine) queues.delete(paths.lock);
  }
}

interface Handle extends HeldLock {
  release(): Promise<void>;
}

async function acquire(paths: Pick<StorePaths, 'state' | 'lock'>, deadline: number): Promise<Handle> {
  let compromised: Error | null = null;
  const options: lockfile.LockOptions = {
    fs: LOCK_FS,
    lockfilePath: paths.lock,
    realpath: false, // state.json may not exist yet
    stale: LOCK_STALE_MS,
    update: LOCK_UPDATE_MS,
    retries: 0,
    // The default throws from a timer, which would kill the process; the save checks the flag.
    onCompromised: (err) => {
      compromised = err;
      process.stderr.write(`[opencomms] state lock lost: ${err.message}\n`);
    },
  };
  for (let attempt = 0; ; attempt++) {
    let release: () => Promise<void>;
    try {
      // First try synchronously: an uncontended mkdir costs microseconds, the async one a
      // thread-pool round trip. Waiting (retries) stays asynchronous and yields the event loop.
      if (attempt === 0) {
        const releaseSync = lockfile.lockSync(paths.state, options);
        release = async () => releaseSync();
      } else release = await lockfile.lock(paths.state, options);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ELOCKED') throw e; // EACCES/EROFS/EMFILE/...: at once
      const left = deadline - Date.now();
      if (left <= 0) throw stateBusy();
      const jitter = LOCK_RETRY_MIN_MS + Math.random() * (LOCK_RETRY_MAX_MS - LOCK_RETRY_MIN_MS);
      await sleep(Math.min(left, jitter));
      continue;
    }
    return {
      get compromised() {
        return compromised;
      },
      assertHeld() {
        if (compromised) throw new Error(`state lock lost while writing (${compromised.message}); nothing saved`);
      },
      async release() {
        // A compromised lock is already gone (or someone else's now): removing it would be wrong.
        if (compromised) return;
        // The work is done (and maybe saved): a failed unlock must not turn it into an error. The
        // lock goes stale and is broken by the next waiter.
        await release().catch((err: Error) => process.stderr.write(`[opencomms] unlock failed: ${err.message}\n`));
      },
    };
  }
}
