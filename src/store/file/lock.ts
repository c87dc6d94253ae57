// Cross-process lock on `.opencomms/.state.lock` (protocol.md "Writing").
// The lock is a hard link: each process makes one empty token file once (`.state-lock.<pid>.<8
// hex>.tmp`, the temp-file pattern doctor sweeps when its process is gone) and takes the lock by
// linking it to `.state.lock`, which exactly one process can do. A link adds a name to an
// existing inode, so taking the lock allocates and frees no inode (an O_EXCL file or a mkdir per
// lock would, which is a large part of a send's time). The holder refreshes the lock's
// mtime (the token's mtime is at most LOCK_UPDATE_MS old when it is linked, so a new lock never
// looks old); a lock not refreshed for LOCK_STALE_MS is stale and may be broken. The holder proves the lock
// is still its own (same inode, same change time) right before every write, so a holder whose
// lock was broken notices before it writes, not on its next refresh. Waiters sleep until the
// lock goes away (a file-system watch on the lock itself while they wait, with a short timer as
// the fallback) instead of polling at random intervals.
import {
  closeSync,
  linkSync,
  openSync,
  readdirSync,
  rmdirSync,
  statSync,
  unlinkSync,
  utimesSync,
  watch,
  type FSWatcher,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { LOCK_RETRY_MAX_MS, LOCK_STALE_MS, LOCK_TIMEOUT_MS, LOCK_UPDATE_MS } from '../../protocol/limits.ts';
import { RefusalError, refuse } from '../../protocol/result.ts';
import { TEMP_NAME_RE, tempName } from './atomic.ts';
import type { StorePaths } from '../paths.ts';
import { pidAlive } from '../pid.ts';

export interface HeldLock {
  /** Set when the lock was found broken (gone, or another process's now). */
  readonly compromised: Error | null;
  /** Throws unless the lock is still this holder's: call right before any write that relies on it. */
  assertHeld(): void;
}

export const stateBusy = () =>
  new RefusalError(
    refuse(
      'state_busy',
      `State lock not acquired within ${LOCK_TIMEOUT_MS} ms; another process is writing. Retry shortly.`,
    ),
  );

/** In-process FIFO per lock path: callers of one process queue here instead of racing each
 *  other for the directory (which is unfair and burns the deadline). */
const queues = new Map<string, Promise<void>>();

export interface LockOptions {
  timeoutMs?: number;
  /** Work that needs no lock, run each time the lock is found held, before the wait: what the
   *  caller would otherwise do right after taking it (a store reads what the holder before it
   *  wrote). The lock is then held for less of a turn, which is what bounds contending writers.
   *  Whatever it throws is ignored: the holder does the same work again under the lock. */
  whileBusy?: () => void;
}

export async function withLock<T>(
  paths: Pick<StorePaths, 'state' | 'lock'>,
  fn: (lock: HeldLock) => Promise<T>,
  opts: LockOptions = {},
): Promise<T> {
  // The deadline covers the in-process queue too: a stuck holder fails every waiter at ~5 s,
  // whether it is another process or this one. A nested acquisition (the holder waiting on its
  // own queue) is such a holder: it fails at the deadline, it never hangs. Telling it apart by
  // async context (AsyncLocalStorage) would turn on Node 20's promise hooks for every promise of
  // the process, which slows every send. The deadline is on the monotonic clock: a wall-clock step
  // (NTP, a VM resumed) must not shorten or stretch the wait.
  const deadline = performance.now() + (opts.timeoutMs ?? LOCK_TIMEOUT_MS);

  const prev = queues.get(paths.lock);
  let leave!: () => void;
  const gate = new Promise<void>((r) => (leave = r));
  const mine = (prev ?? Promise.resolve()).then(() => gate);
  queues.set(paths.lock, mine);
  try {
    if (prev) await turn(prev, deadline);
    const handle = await acquire(paths.lock, deadline, opts.whileBusy);
    try {
      return await fn(handle);
    } finally {
      handle.release();
    }
  } finally {
    leave();
    if (queues.get(paths.lock) === mine) queues.delete(paths.lock);
  }
}

/** Resolves when the waiter ahead in this process is done; state_busy at the deadline. */
function turn(ahead: Promise<void>, deadline: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(stateBusy()), Math.max(0, deadline - performance.now()));
    void ahead.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

interface Handle extends HeldLock {
  release(): void;
}

const lost = (why: string) => new Error(`state lock lost (${why}); nothing saved`);

async function acquire(lock: string, deadline: number, whileBusy?: () => void): Promise<Handle> {
  for (let lostTokens = 0; ; ) {
    const token = tokenFor(lock);
    try {
      // The lock's mtime is the token's: touched at most LOCK_UPDATE_MS before the link, a new
      // hold is as fresh as one its holder has just refreshed (and a busy process does not touch
      // its token, waking every watcher of the directory, on every lock).
      const now = Date.now();
      if (now - token.touched >= LOCK_UPDATE_MS) {
        utimesSync(token.path, new Date(now), new Date(now));
        token.touched = now;
      }
      linkSync(token.path, lock);
      return hold(lock, identity(lock), token.touched);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // Our token was removed under us (by hand; doctor leaves a live process's alone): make a
      // new one. A missing directory fails in tokenFor, at once.
      if (code === 'ENOENT' && ++lostTokens <= 3) {
        tokens.delete(lock);
        continue;
      }
      // EACCES/EROFS/EMFILE/ENOTDIR/...: at once. Only "someone holds it" waits.
      if (code !== 'EEXIST') throw e;
    }
    // A woken waiter looks before it links again: a link takes the directory's write lock, which
    // the holder's own unlink and journal need, and most wake-ups (another waiter won, a watch
    // event for the lock being taken) find the lock held.
    while (!breakIfStale(lock)) {
      try {
        whileBusy?.();
      } catch {
        // done again under the lock, where a failure is reported
      }
      const left = deadline - performance.now();
      if (left <= 0) throw stateBusy();
      await released(lock, Math.min(left, LOCK_RETRY_MAX_MS));
    }
  }
}

/** This process's token per lock path: when its mtime was last set, and whether it has been
 *  written under (then it is kept). */
interface Token {
  path: string;
  touched: number;
  wrote: boolean;
}
const tokens = new Map<string, Token>();
let exitHooked = false;

/** The token this process links to take `lock`, made on first use and kept once the process has
 *  written under it (a process that only reads or is refused leaves no file). It is removed when
 *  the process exits; tokens of processes that died are removed when a new one is made, so a
 *  crashed process leaves at most one file until the next process starts. */
function tokenFor(lock: string): Token {
  const known = tokens.get(lock);
  if (known) return known;
  const dir = dirname(lock);
  const prefix = `.${basename(lock).replace(/^\./, '').replace(/\./g, '-')}.`;
  const made = join(dir, tempName(prefix.slice(0, -1)));
  closeSync(openSync(made, 'wx'));
  if (tokens.size === 0 && !exitHooked) {
    exitHooked = true;
    process.once('exit', () => {
      for (const l of [...tokens.keys()]) dropToken(l);
    });
  }
  const token = { path: made, touched: Date.now(), wrote: false };
  tokens.set(lock, token);
  sweepTokens(dir, prefix);
  return token;
}

function dropToken(lock: string) {
  const token = tokens.get(lock);
  tokens.delete(lock);
  try {
    if (token) unlinkSync(token.path);
  } catch {
    // gone already
  }
}

function sweepTokens(dir: string, prefix: string) {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const pid = n.startsWith(prefix) ? Number(TEMP_NAME_RE.exec(n)?.[1]) : NaN;
    if (!(pid > 0) || pid === process.pid || pidAlive(pid)) continue;
    try {
      // A dead holder's token may still be linked as the lock: that name stays for the stale rule.
      unlinkSync(join(dir, n));
    } catch {
      // gone already
    }
  }
}

/** Identity of the lock: the token's inode and its change time, which the link (and every
 *  refresh) sets. A lock broken and taken by another process has another inode; one broken and
 *  re-linked by us has another change time. */
const identity = (lock: string) => {
  const st = statSync(lock, { bigint: true });
  return `${st.ino}:${st.ctimeNs}`;
};

/** The lock as its holder sees it: its identity, and when the holder last refreshed it. */
function hold(lock: string, created: string, touched: number): Handle {
  let mine = created;
  let refreshedAt = touched;
  let compromised: Error | null = null;
  const check = () => {
    if (compromised) return;
    let now: string;
    try {
      now = identity(lock);
    } catch {
      compromised = lost('the lock file is gone');
      return;
    }
    if (now !== mine) compromised = lost('another process holds it now');
  };
  const refresh = () => {
    check();
    if (compromised) return;
    const now = new Date();
    try {
      utimesSync(lock, now, now);
      mine = identity(lock);
      refreshedAt = now.getTime();
      const token = tokens.get(lock);
      if (token) token.touched = refreshedAt;
    } catch (e) {
      compromised = lost(`refresh failed: ${(e as Error).message}`);
    }
  };
  // Keeps a long holder from looking stale; the check before each write is what protects data.
  const timer = setInterval(() => {
    refresh();
    if (compromised) {
      process.stderr.write(`[opencomms] ${compromised.message}\n`);
      clearInterval(timer);
    }
  }, LOCK_UPDATE_MS);
  timer.unref();
  return {
    get compromised() {
      return compromised;
    },
    assertHeld() {
      // A refresh older than the update period is renewed first, so the lock is ours and fresh
      // for at least LOCK_STALE_MS − LOCK_UPDATE_MS when the write that follows starts.
      if (Date.now() - refreshedAt >= LOCK_UPDATE_MS) refresh();
      else check();
      if (compromised) throw compromised;
      const token = tokens.get(lock);
      if (token) token.wrote = true;
    },
    release() {
      clearInterval(timer);
      check();
      // A broken lock is gone or someone else's now: removing it would be wrong.
      if (compromised) return;
      try {
        unlinkSync(lock);
      } catch (e) {
        // The work is done (and maybe saved): a failed unlock must not turn it into an error. The
        // lock goes stale and the next waiter breaks it.
        process.stderr.write(`[opencomms] unlock failed: ${(e as Error).message}\n`);
      }
      // A process that has not written (refusals, sweeps with nothing to do) leaves no file.
      if (!tokens.get(lock)?.wrote) dropToken(lock);
    },
  };
}

const isStale = (st: { mtimeMs: number }) => Date.now() - st.mtimeMs > LOCK_STALE_MS;

/** Whether the lock is held now by a holder that is not stale (this process included). */
export function lockHeld(paths: Pick<StorePaths, 'lock'>): boolean {
  const st = statSync(paths.lock, { throwIfNoEntry: false });
  return st !== undefined && !isStale(st);
}

/** Removes the lock if it was not refreshed for LOCK_STALE_MS; true when the caller should retry
 *  at once (broken, or already gone). */
function breakIfStale(lock: string): boolean {
  let st;
  try {
    st = statSync(lock);
  } catch {
    return true; // released between our mkdir and this stat
  }
  if (!isStale(st)) return false;
  // Re-read right before removing, so a holder that refreshed (or a new holder) is left alone.
  try {
    const again = statSync(lock);
    if (again.ino !== st.ino || again.mtimeMs !== st.mtimeMs) return true;
    // A directory is the lock of an OpenComms before the journal: the same rules apply.
    if (again.isDirectory()) rmdirSync(lock);
    else unlinkSync(lock);
    process.stderr.write(
      `[opencomms] broke a stale state lock (not refreshed for ${Math.round(Date.now() - st.mtimeMs)} ms)\n`,
    );
  } catch {
    // gone already, or someone else broke it first
  }
  return true;
}

// ---- waiting for a release -------------------------------------------------------------------

/** Resolves when the lock is released, broken or refreshed (or after `maxMs`). The watch is on the
 *  lock itself, that is on its holder's token: removing the lock's name changes the token's link
 *  count, which inotify reports on that file alone, and only while this process waits. A watch on
 *  `.opencomms/` instead would wake every waiter on every write to that directory by anyone. */
function released(lock: string, maxMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    let fsw: FSWatcher | null = null;
    let over = false;
    const done = () => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      fsw?.close();
      resolve();
    };
    const timer = setTimeout(done, maxMs);
    try {
      fsw = watch(lock, { persistent: false }, done);
      fsw.on('error', done);
    } catch (e) {
      // Released since the caller looked: look again now. Anything else (no inotify watches
      // left): the timer alone paces the retries.
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') done();
    }
  });
}
