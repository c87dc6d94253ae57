// The PostgreSQL store's numbers for several machines, each with its unit and why.

/** An expired lease row is kept this long, then deleted by the next renewal of any process: a
 *  missing row means gone just as an expired one does, and a minute lets `members` and `status`
 *  still show a process that just lost its lease as expired rather than unknown. */
export const PG_LEASE_KEEP_EXPIRED_MS = 60_000;
