// The PostgreSQL store's numbers for several machines, each with its unit and why.

/** An expired lease row is kept this long, then deleted by the next renewal of any process: a
 *  missing row means gone just as an expired one does, and a minute keeps a process that just lost
 *  its lease visible as expired to an operator reading the table, while rows of ended processes
 *  do not pile up. */
export const PG_LEASE_KEEP_EXPIRED_MS = 60_000;
