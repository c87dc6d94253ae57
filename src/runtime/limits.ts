// Runtime timings, each with the reason for its number.

/** Safety-net rescan of state.json for mail a missed or coalesced watch event left behind. Rare by
 *  design (the watch catches nearly everything), so 2 s costs little and bounds the worst case. */
export const RESCAN_INTERVAL_MS = 2000;

/** History-log envelopes read for one `history` call: the most a page (100) can show, plus
 *  slack for de-duplication against hot state. */
export const HISTORY_READ_MAX = 200;
