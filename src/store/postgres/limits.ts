// The PostgreSQL store's numbers, each with its unit and why.

/** Changes between two snapshots: a cold start (a hook process starts cold on every prompt) reads one
 *  snapshot and at most twice this many changes (the previous interval is kept for processes that
 *  lag behind), and a snapshot of a busy project (~100 KB of JSON) then costs well under 1% of the
 *  changes it replaces, as the file store's journal of ~700 sends does. */
export const PG_SNAPSHOT_EVERY = 500;

/** The characters of one piece of a snapshot (store.ts `snapshot`): its statement's buffers stay
 *  under glibc's default mmap threshold (128 KiB) even at 3 bytes a character. A larger buffer,
 *  once freed, raises that threshold for the rest of the process, and medium allocations after it
 *  come from the heap, which keeps their memory (a 3 MB snapshot in one statement left the MCP
 *  server ~4.5 MB larger: `npm run bench -- postgres mcp`, RSS after 10k sends). */
export const PG_SNAPSHOT_PIECE_CHARS = 40_000;

/** How long a session may sit in a transaction without a statement before the server ends it:
 *  the project's lock is held across one turn of the holding process (store.ts, the locked
 *  path), and a holder that is stopped or cut off by a partition must not keep every writer of
 *  the project waiting until TCP gives up (hours). Shorter than the lock timeout, so that a writer
 *  waiting behind such a holder gets the lock instead of a refusal. */
export const PG_IDLE_IN_TRANSACTION_MS = 2_000;

/** How long a mutation waits for the project's row lock before it refuses with `state_busy`:
 *  the file store's lock timeout, so both stores answer a stuck holder alike. */
export { LOCK_TIMEOUT_MS as PG_LOCK_TIMEOUT_MS } from '../../protocol/limits.ts';

/** A connection attempt that has not completed in this long is a refusal (server down or
 *  unreachable), not a hang of the caller. */
export const PG_CONNECT_TIMEOUT_MS = 5_000;

/** A catch-up even with no notification: NOTIFY is a hint, and one sent while the listening
 *  connection was being re-established is lost. 15 s keeps an idle process at 4 queries a minute
 *  (the target is at most 12). */
export const PG_BACKSTOP_MS = 15_000;

/** Waits between attempts to reach a server that dropped (the listening connection coming back,
 *  a commit in doubt asking again): quick at first (a server restart takes ~1 s), then every 5 s. */
export const PG_RECONNECT_DELAYS_MS = [100, 500, 1_000, 2_000, 5_000] as const;

/** The wait before the attempt after `failures` failed ones. */
export const reconnectDelayMs = (failures: number): number =>
  PG_RECONNECT_DELAYS_MS[Math.min(failures, PG_RECONNECT_DELAYS_MS.length - 1)]!;

/** Reloads of the snapshot a mutation may need when the changes its cache lacks were compacted
 *  away meanwhile: one is the rule (a process far behind), a second means compactions outrun it. */
export const PG_COMPACTED_RELOADS = 3;

/** Optimistic attempts of one mutation (each one statement, no lock held between round trips)
 *  before it takes the project's lock for a last one that cannot lose. One: a try loses only to
 *  another writer's commit, and while one writer loses, the others keep committing, so a second
 *  optimistic try mostly loses again, and costs a whole run of the mutation each time. */
export const PG_OPTIMISTIC_TRIES = 1;

/** A read this soon after a query that read the project's head at the cached change (a lease
 *  renewal) uses the cache: it is as new as that query's answer, and the lease check that follows
 *  every renewal then costs no query of its own. */
export const PG_HEARD_FRESH_MS = 20;

/** How long a mutation whose commit's answer was lost with its connection keeps asking the
 *  server whether it committed, before it refuses saying the change may have been recorded: a
 *  restart with crash recovery (the soak's `pg_ctl restart -m immediate`) takes a few seconds,
 *  and a caller that waits this long for a definite answer is better served than one told
 *  "unknown". */
export const PG_IN_DOUBT_MS = 10_000;
