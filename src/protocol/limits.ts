// Every limit and default of the protocol, each with the reason for its number.
// protocol.md "Rules and defaults" states these values; where this file departs from it, the comment says why.

export const SCHEMA_VERSION = 2;

/** Longest content one envelope may carry: large enough for a full review, small enough that a
 *  batch of 20 still fits a model's context and the 1 MiB MCP frame. */
export const MAX_CONTENT_CHARS = 100_000;

/** Default members per channel: a small team; the clamp keeps fan-out (one envelope per
 *  recipient per send) bounded. */
export const DEFAULT_MAX_MEMBERS = 8;
export const MIN_MAX_MEMBERS = 2;
export const MAX_MAX_MEMBERS = 32;

/** Logical sends per channel per fixed window: enough for a lively exchange, few enough that two
 *  agents stuck in a loop stop within a minute. */
export const DEFAULT_RATE_LIMIT = 20;
export const MIN_RATE_LIMIT = 1;
export const MAX_RATE_LIMIT = 1000;
/** Fixed rate window (protocol.md "Rules and defaults"): the count restarts when `now − window_start > 60000`. */
export const RATE_WINDOW_MS = 60_000;

/** Duplicate-window keys kept per channel, newest first. At the default rate (20 per minute)
 *  a channel cannot send more than 100 messages inside the 5-minute window, so 100 is exact
 *  there; a channel whose rate limit was raised keeps its last 100 contents, which still catches
 *  a looping agent, and its hot state stays ~6 KB instead of growing with the send rate. */
export const MAX_SEEN_CONTENT = 100;

/** Hop cap of a reply chain: request → response → follow-up → answer → last word; the 6th
 *  message of a chain is almost always a loop. */
export const DEFAULT_MAX_HOPS = 4;
export const MIN_MAX_HOPS = 1;
export const MAX_MAX_HOPS = 50;

/** Per-recipient push cooldown: coalesces a burst into one prompt instead of one turn per message. */
export const DELIVERY_COOLDOWN_MS = 1000;

/** Push stale window and duplicate window: mail older than a typical agent turn plus slack is no
 *  longer worth injecting into a live session; the same text twice within it is a resend. */
export const STALE_EVENT_MS = 300_000;

/** One retry after a failed prompt: long enough for a host hiccup to pass, short enough to feel live. */
export const DELIVERY_RETRY_MS = 2000;

/** Dead letter after this many hand-overs: a message the host refused five times is poison. */
export const MAX_DELIVERY_ATTEMPTS = 5;

/** Envelopes per push/spawn hand-over and default pull size: one prompt stays readable. */
export const MAX_BATCH = 20;
export const MAX_PULL_LIMIT = 100;

/** Cross-server fallback for ownerless push members: the owner normally wakes within ms (its
 *  subscription); 5 s means nobody owns the session. */
export const CROSS_SERVER_FALLBACK_MS = 5000;

/** Live envelopes kept at most; past it the oldest pending is pruned (with an error). The original
 *  specification says 2000, a bound on what every mutation rewrote when state.json was rewritten whole. With
 *  the journal a live envelope costs a mutation nothing, so the cap only bounds memory (~1 KB an
 *  envelope in every process that holds the state): 20,000 lets a member that is away for a day
 *  keep its mail (a backlog of 10,000 is a benchmark figure), where 2000 dropped accepted mail. */
export const MAX_PERSISTED_MESSAGES = 20_000;

/** Terminal envelopes kept in hot state per channel: none. An envelope leaves state.json for its
 *  channel's append-only history log in the same locked mutation that makes it terminal, so
 *  state.json holds only live mail and a mutation's cost does not grow with history. */
export const HOT_TERMINAL_PER_CHANNEL = 0;

/** How far back a reply's parent is looked for in the history log: replies answer recent
 *  messages; an older parent starts a new chain (hop 0), which a tight loop can never exploit. */
export const PARENT_SCAN_LINES = 10_000;

/** Largest state.json a process reads: Node holds no string over ~512 MiB, and parsing half that
 *  takes seconds and gigabytes in every process that loads it. Live mail is capped
 *  (MAX_PERSISTED_MESSAGES, ~1 KB an envelope), so a real state stays far below; a larger file is
 *  damage or a stranger's file, refused before it is read. */
export const MAX_STATE_FILE_BYTES = 256 * 1024 * 1024;

export const MAX_ERRORS = 200;
/** Chain roots remembered per channel. The original specification allows up to 500; nothing reads
 *  more than the recent ones, and every id is hot state of a busy channel. Past this cap the list
 *  is cut back to its newest half at once, not by one id per send: a send then appends one id to
 *  the journal instead of rewriting all of them. */
export const MAX_PROCESSED_CORRELATIONS = 128;
export const MAX_DESCRIPTION_CHARS = 140;
export const MAX_SUMMARY_CHARS = 2000;
export const MAX_ARCHIVE_MESSAGES = 2000;
export const FINAL_NOTE_CHARS = 400;
export const STATUS_ERRORS_SHOWN = 20;

export const DEFAULT_READ_LIMIT = 20;
export const MAX_READ_LIMIT = 100;
export const DEFAULT_ARCHIVE_LIMIT = 50;
export const MAX_ARCHIVE_LIMIT = 500;

/** Budgets: a runtime budget under a minute or over 30 days is a typo, not a plan. */
export const MIN_BUDGET_RUNTIME_MS = 60_000;
export const MAX_BUDGET_RUNTIME_MS = 2_592_000_000;
export const MIN_BUDGET_MESSAGES = 1;
export const MAX_BUDGET_MESSAGES = 1_000_000;

/** `base`, then `base-r2` … `base-r9`. */
export const MAX_RESUME_LADDER = 8;

export const MAX_CHANNEL_NAME = 64;

/** Lock: a waiter gives up after 5 s (`state_busy`) and retries at most every 10 ms.
 *  The original specification says a lock is stale after 15 s; we break it after 3 s instead, because a waiter
 *  that gives up at 5 s could never break a 15 s-stale lock, and a SIGKILLed holder must not stall
 *  others for more than a few seconds. A live holder refreshes its lock every second, so only a
 *  holder whose event loop is blocked for 3 s could lose it. */
export const LOCK_TIMEOUT_MS = 5000;
export const LOCK_STALE_MS = 3000;
export const LOCK_UPDATE_MS = 1000;
export const LOCK_RETRY_MAX_MS = 10;

/** The journal size after which the next mutation writes the state whole again (a new snapshot):
 *  ~700 sends. Readers replay at most this much on a cold start (the Claude Code hook starts cold
 *  on every prompt), and a snapshot of a busy project (~100 KB) then costs under 1% of the appends
 *  it replaces. A large backlog makes each snapshot dear; a size that grew with it would lengthen every cold load instead
 *  (docs/performance.md). */
export const JOURNAL_COMPACT_BYTES = 1_048_576;

/** Rename retries of an atomic save (transient EBUSY/EPERM on some file systems). */
export const RENAME_RETRY_DELAYS_MS = [0, 50, 100] as const;

/** MCP framing: 1 MiB per JSON-RPC line; the input buffer never holds more than 2 MiB. */
export const MCP_MAX_FRAME_BYTES = 1_048_576;
export const MCP_MAX_BUFFER_BYTES = 2_097_152;

/** Sentinel project ids: placeholders that never cause a project mismatch. */
export const SENTINEL_PROJECT_IDS = ['local-project', 'gui-local-project', 'cli-local-project', 'global'] as const;

export const ROLE_HEADER = '## OpenComms role instructions';

export const MESSAGE_TYPES = ['review_request', 'review_response', 'manual'] as const;
export const SYSTEM_MESSAGE_TYPE = 'system';

export const OPERATOR_ID = 'operator';
export const OPERATOR_ROLE = 'Operator';

// ---- What each host shows its model whole (docs/hosts.md "What each route shows whole") -------------
// Hosts cut, move to files or escape text past a size of their own, counted in a unit of their own
// (UTF-16 characters, UTF-8 bytes, JSON-escaped characters). OpenComms measures every text it hands
// over with `shownSize` (src/framing.ts), which is never less than any of those units, against each
// route's limit, measured per host on the real binary (adapters/route-limits.ts).

/** Largest part of a message, in shownSize units: a message longer than this travels as parts, each
 *  its own envelope and frame, so that one framed part (with its header, notice and one line of
 *  OpenComms' own) fits the smallest route of any host (a hook's context, 10,000). */
export const MAX_PART_SIZE = 7500;

/** Room kept in a hook's context for OpenComms' own line about mail that waits ("N more…"). */
export const CONTEXT_NOTE_RESERVE = 400;

/** A read's answer (`opencomms_pull`, a hook's hand-over) around its frames: the message, the
 *  notice and the ids (PULL_ANSWER_RESERVE), and per frame its JSON keys, channel name and id twice
 *  (PULL_ENTRY_OVERHEAD), each above what they take at their longest. */
export const PULL_ANSWER_RESERVE = 600;
export const PULL_ENTRY_OVERHEAD = 200;

/** A route's limit: what its host shows whole, in shownSize units. */
export type RouteName = 'hook_context' | 'wake' | 'push' | 'tool_result';

/** A route no host was measured for (any other MCP client's tool result): below every measured
 *  tool result and hook context, and above the largest framed part with a read's overheads
 *  (test/engine/parts.test.ts), so at least one part always fits. */
export const DEFAULT_ROUTE_LIMIT = 9_500;

/** The wake guard (protocol.md "Wakes"): a message sent within this long of its sender being
 *  woken by OpenComms answers that wake, and its wake chain is one longer than the wake's. A model
 *  that acknowledges writes its answer in seconds; a reviewer pair that works 30 s or more between
 *  replies stays under it (the simulation's genuine reviewers: never held). */
export const REFLEX_MS = 20_000;
/** Wakes in a row whose turns each answered within REFLEX_MS before the next wake is held: two
 *  polite agents get six turns OpenComms started (three each), then their mail waits for a turn a
 *  person or the model starts. A request, its answer, a follow-up and its answer fit in fewer. */
export const LOOP_WAKES = 6;
/** Rolling window of the wake budgets. An hour: the unit a person reads cost in. */
export const WAKE_BUDGET_WINDOW_MS = 3_600_000;
/** Wakes one member may be given per window on a new channel: one a minute on average, which a
 *  reviewer pair that works 30 s per reply just reaches and a broadcast storm does not pass. */
export const DEFAULT_WAKES_PER_MEMBER = 60;
/** Wakes a whole new channel may start per window: four members at their own budget. */
export const DEFAULT_WAKES_PER_CHANNEL = 240;
/** Largest wake budget a channel accepts (per member or per channel, per window). */
export const MAX_WAKE_BUDGET = 100_000;
/** The cost ledger's bucket: windows (last hour, last day) are sums of whole buckets, so they
 *  cover up to one bucket more than they name. Ten minutes keeps a member's day at 145 buckets. */
export const USAGE_BUCKET_MS = 600_000;
/** Buckets older than this leave the ledger (its totals keep them). */
export const USAGE_KEEP_MS = 86_400_000;
/** A token estimate per shown character: the common rule of thumb of four characters a token,
 *  labelled an estimate wherever it is shown. */
export const CHARS_PER_TOKEN_ESTIMATE = 4;
