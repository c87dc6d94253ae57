// Runtime timings, each with the reason for its number.

/** History-log envelopes read for one `history` call: the most a page (100) can show, plus
 *  slack for de-duplication against hot state. */
export const HISTORY_READ_MAX = 200;
