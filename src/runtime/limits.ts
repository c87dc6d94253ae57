// Runtime timings, each with the reason for its number.

/** Safety-net rescan of state.json for mail a missed watch event left behind (FEATURES.md's
 *  polling fallback interval). A rescan of a state this process already holds costs one stat. */
export const RESCAN_INTERVAL_MS = 500;

/** A trailing scan after each watch event, just past chokidar's 5 ms per-file throttle, which
 *  drops (never delays) a second change inside that window. */
export const WATCH_TRAILING_MS = 10;

/** History-log envelopes read for one `history` call: the most a page (100) can show, plus
 *  slack for de-duplication against hot state. */
export const HISTORY_READ_MAX = 200;
