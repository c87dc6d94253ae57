// Runtime timings, each with the reason for its number.

/** A process catching up while idle (RuntimeOptions.catchUpWhileIdle) does so this soon after a
 *  catch-up that applied something, for the first CATCH_UP_QUIET_MS after its last call (one that
 *  found nothing waits twice as long as the last, up to CATCH_UP_IDLE_MAX_MS). A read right after a
 *  burst of another server's writes then finds at most this much of them left to apply; a shorter
 *  period makes that read no faster (docs/performance.md). A journal line costs the same whenever
 *  it is applied, so a busy server does no more work, only earlier; a catch-up with nothing new
 *  costs a timer's turn and two `stat`s, about 0.25 ms of CPU, which at a fixed 10 ms was 27 of
 *  the 29 ms a second an MCP server spent while its agent called every 1.5 s. */
export const CATCH_UP_IDLE_MS = 10;
/** An agent's next call mostly comes within a second of its last; a server quiet for longer
 *  wakes once a second for two stats. */
export const CATCH_UP_QUIET_MS = 1_000;
export const CATCH_UP_IDLE_MAX_MS = 1_000;

/** History-log envelopes read for one `history` call: the most a page (100) can show, plus
 *  slack for de-duplication against hot state. */
export const HISTORY_READ_MAX = 200;

/** Envelopes of a session's history log shown in the live machine view beside its live mail:
 *  enough to watch the recent traffic settle, few enough that a refresh stays one small read. */
export const DELIVERY_VIEW_LOGGED = 50;

/** The framed batch is ONE argv element: Linux caps one element at MAX_ARG_STRLEN (32 pages =
 *  131072 bytes, terminating NUL included); macOS caps only the total (1 MiB), so Linux binds. */
export const SPAWN_ARG_MAX_BYTES = 131_071;

/** Windows caps the whole command line at 32767 UTF-16 units, and argument quoting may double
 *  backslashes and quotes: half of it for the command line keeps a quoted batch within the limit
 *  (a UTF-8 byte count is never below the UTF-16 count, so bytes are a safe measure). */
export const SPAWN_CMDLINE_MAX_WIN32 = 16_000;

/** A continued host session runs one model turn with its tool calls; a CLI still running after this is hung
 *  and is killed (the batch is re-queued and retried). */
export const SPAWN_TIMEOUT_MS = 600_000;

/** The CLI's output is ignored (never logged); past this much it is killed as runaway. */
export const SPAWN_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

/** How long a process of another computer counts as alive after its last lease renewal, on the
 *  store's clock (OPENCOMMS_LEASE_MS overrides it, within LEASE_MIN_MS..LEASE_MAX_MS): a dead or cut
 *  off computer's in-flight mail waits this long before it goes back to its queue, and a partition
 *  shorter than this costs nothing. */
export const LEASE_MS = 15_000;
export const LEASE_MIN_MS = 1_000;
export const LEASE_MAX_MS = 120_000;

/** Renewals per lease: three, so two renewals may be lost (a slow query, a brief stall) before the
 *  lease expires; at the default lease that is one query every 5 s, 12 a minute. */
export const LEASE_RENEWALS_PER_LEASE = 3;

/** A holder's lease is checked again this long after the moment it expires (the store's clock may
 *  be a little ahead of this timer): the sweep then follows the expiry within it. */
export const LEASE_EXPIRY_SLACK_MS = 250;
