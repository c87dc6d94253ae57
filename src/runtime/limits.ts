// Runtime timings, each with the reason for its number.

/** History-log envelopes read for one `history` call: the most a page (100) can show, plus
 *  slack for de-duplication against hot state. */
export const HISTORY_READ_MAX = 200;

/** Envelopes of a session's history log shown in the live machine view beside its live mail:
 *  enough to watch the recent traffic settle, few enough that a refresh stays one small read. */
export const DELIVERY_VIEW_LOGGED = 50;
