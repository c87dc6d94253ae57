// Runtime timings, each with the reason for its number.

/** A following process (RuntimeOptions.follow) catches up this often while it waits for its
 *  next call, for the first FOLLOW_QUIET_MS; then every FOLLOW_IDLE_MAX_MS. Above the gaps
 *  between the calls of a busy agent (a send, a drain: 1–20 ms), so a busy server is not
 *  interrupted; lines that land meanwhile are applied 50 ms at a time, not left for the call. */
export const FOLLOW_IDLE_MS = 50;
/** An agent's next call mostly comes within a second of its last; a server quiet for longer
 *  wakes once a second for two stats. */
export const FOLLOW_QUIET_MS = 1_000;
export const FOLLOW_IDLE_MAX_MS = 1_000;

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

/** A resumed session runs one model turn with its tool calls; a CLI still running after this is hung
 *  and is killed (the batch is re-queued and retried). */
export const SPAWN_TIMEOUT_MS = 600_000;

/** The CLI's output is ignored (never logged); past this much it is killed as runaway. */
export const SPAWN_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
