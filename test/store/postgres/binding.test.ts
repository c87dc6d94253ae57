// Choosing the store and authentication by construction, on a real PostgreSQL: `store init`
// records no secret, every entry point's runtime uses the binding, a password given through the
// environment appears in no file and no output, `store grant` isolates projects by role, and the
// failures a user meets (no server, a newer layout, a forbidden URL) are refusals.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { grantSql } from '../../../src/cli/commands/store.ts';
import { RefusalError } from '../../../src/protocol/result.ts';
import type { State } from '../../../src/protocol/schema.ts';
import { openRuntime } from '../../../src/runtime/runtime.ts';
import { clientConfig } from '../../../src/store/postgres/connect.ts';
import { PG_IDLE_IN_TRANSACTION_MS, PG_LOCK_TIMEOUT_MS } from '../../../src/store/postgres/limits.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { cli, liveProject } from '../../cli/fixtures.ts';
import { admin, dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';
import { tempProject } from '../../helpers/store-fixtures.ts';

const refusalOf = async (p: Promise<unknown>) => {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(RefusalError);
  return (e as RefusalError).refusal;
};

/** The test server's URL as `user` (with `password` when given). */
const urlAs = (user: string, password?: string) => {
  const u = new URL(testDatabaseUrl());
  u.username = user;
  u.password = password ?? '';
  return u.toString();
};

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(p)));
    else out.push(p);
  }
  return out;
}

describe('the PostgreSQL store chosen by `opencomms store init`', () => {
  const keys: string[] = [];
  const roles: string[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  const savedPassword = process.env.PGPASSWORD;
  const project = async () => {
    const t = await tempProject();
    cleanups.push(t.cleanup);
    return t.dir;
  };
  beforeEach(() => {
    keys.push(newProjectKey('b'));
  });
  afterEach(async () => {
    if (savedPassword === undefined) delete process.env.PGPASSWORD;
    else process.env.PGPASSWORD = savedPassword;
    for (const k of keys.splice(0)) await dropProject(k);
    for (const r of roles.splice(0)) await admin((c) => c.query(`drop role if exists "${r}"`));
    for (const c of cleanups.splice(0)) await c();
  });

  it('two project folders bound to one key share one project; no password reaches a file or an output', async () => {
    const key = keys[0]!;
    const role = `oc_test_${key}`;
    const secret = `pw-${key}-Secret`;
    roles.push(role);
    await admin(async (c) => {
      for (const stmt of grantSql(key, role)
        .split('\n')
        .filter((l) => l && !l.startsWith('--')))
        await c.query(stmt);
      await c.query(`alter role "${role}" password '${secret}'`);
    });
    process.env.PGPASSWORD = secret;
    const [a, b] = [await project(), await project()];
    for (const dir of [a, b])
      expect((await cli('store', 'init', urlAs(role), '--key', key, '--project', dir)).code).toBe(0);
    await liveProject(a);
    const fromB = await cli('status', '--json', '--project', b);
    expect(fromB.json().data.channels.map((c: { name: string }) => c.name)).toContain('team');
    const st = await cli('store', 'status', '--json', '--project', b);
    const d = st.json().data;
    expect(d).toMatchObject({ store: 'postgres', key, lag: 0 });
    expect(d.server_version).toMatch(/^\d+/);
    expect(d.head).toBeGreaterThan(0);
    const doctor = await cli('doctor', '--json', '--project', a);
    const rows = doctor.json().data.rows as Array<{ level: string; check: string; detail: string }>;
    expect(rows.find((r) => r.check === 'store')).toMatchObject({ level: 'OK', detail: expect.stringContaining(key) });
    expect(rows.find((r) => r.check === 'state')?.detail).toMatch(/2 live channel/);
    const outputs = [
      fromB.out,
      fromB.err,
      st.out,
      st.err,
      (await cli('store', 'status', '--project', a)).out,
      doctor.out,
      (await cli('channels', '--json', '--project', a)).out,
    ];
    for (const dir of [a, b])
      for (const f of await filesUnder(join(dir, '.opencomms'))) outputs.push(await readFile(f, 'utf8'));
    const rt = openRuntime(b);
    outputs.push(JSON.stringify((await rt.read()).errors));
    await rt.close();
    for (const o of outputs) expect(o).not.toContain(secret);
    expect(JSON.parse(await readFile(join(a, '.opencomms', 'store.json'), 'utf8'))).toEqual({
      kind: 'postgres',
      url: urlAs(role),
      key,
    });
  });

  it('a URL with a password is refused and nothing is recorded', async () => {
    const dir = await project();
    const r = await cli('store', 'init', urlAs('someone', 'hunter2'), '--key', keys[0]!, '--json', '--project', dir);
    expect(r.code).not.toBe(0);
    expect(r.json().data.reason).toBe('invalid_argument');
    expect(r.out).not.toContain('hunter2');
    await expect(stat(join(dir, '.opencomms', 'store.json'))).rejects.toThrow();
  });

  it('a server off loopback without verified TLS, or without credentials, is refused before any connection', () => {
    const env = { PGPASSFILE: '/nonexistent/pgpass' };
    const attempt = (url: string) => {
      try {
        new PgStore({ url, key: keys[0]!, env });
        return null;
      } catch (e) {
        return (e as RefusalError).refusal;
      }
    };
    expect(attempt('postgres://alice@db.example.com/oc')?.message).toMatch(/sslmode=verify-full/);
    expect(attempt('postgres://alice@db.example.com/oc?sslmode=require')?.message).toMatch(/verified certificate/);
    expect(attempt('postgres://alice@db.example.com/oc?sslmode=verify-full')?.message).toMatch(/credentials/);
    expect(attempt('postgres://alice:pw@db.example.com/oc?sslmode=verify-full')).toBeNull();
    expect(attempt('postgres://alice@127.0.0.1/oc')).toBeNull();
  });

  it('a role granted one project can neither read nor write another', async () => {
    const [k1, k2] = [keys[0]!, newProjectKey('b')];
    keys.push(k2);
    const [r1, r2] = [`oc_test_${k1}`, `oc_test_${k2}`];
    roles.push(r1, r2);
    await admin(async (c) => {
      for (const [k, r] of [
        [k1, r1],
        [k2, r2],
      ] as const) {
        for (const stmt of grantSql(k, r)
          .split('\n')
          .filter((l) => l && !l.startsWith('--')))
          await c.query(stmt);
        await c.query(`alter role "${r}" password 'pw'`);
      }
    });
    const mine = new PgStore({ url: urlAs(r1, 'pw'), key: k1 });
    const theirs = new PgStore({ url: urlAs(r2, 'pw'), key: k2 });
    const intruder = new PgStore({ url: urlAs(r1, 'pw'), key: k2 });
    try {
      await mine.mutate((d) => {
        d.errors.push({ at: 1, message: 'mine' });
        return { changed: true, result: null };
      });
      await theirs.mutate((d) => {
        d.errors.push({ at: 1, message: 'theirs' });
        return { changed: true, result: null };
      });
      expect((await refusalOf(intruder.read())).data?.reason).toBe('state_unreadable');
      expect(
        (
          await refusalOf(
            intruder.mutate((d) => {
              d.errors.push({ at: 1, message: 'x' });
              return { changed: true, result: null };
            }),
          )
        ).message,
      ).toMatch(/store grant/);
      await expect(admin((c) => c.query(`select * from "oc_${k2}".changes`), urlAs(r1, 'pw'))).rejects.toThrow(
        /permission denied/,
      );
      expect((await theirs.read()).errors.map((e) => e.message)).toEqual(['theirs']);
    } finally {
      for (const s of [mine, theirs, intruder]) await s.close();
    }
  });

  it('no server at start, and a project laid out by a newer OpenComms, are refusals', async () => {
    const down = new PgStore({ url: 'postgres://postgres@127.0.0.1:1/test', key: keys[0]! });
    const r = await refusalOf(down.read());
    expect(r.data?.reason).toBe('state_unreadable');
    expect(r.message).toMatch(/cannot be reached/);
    await down.close();
    const s = new PgStore({ url: testDatabaseUrl(), key: keys[0]! });
    await s.read();
    await s.close();
    await admin((c) => c.query(`update "oc_${keys[0]}".meta set layout = 99`));
    const newer = new PgStore({ url: testDatabaseUrl(), key: keys[0]! });
    expect((await refusalOf(newer.read())).data?.reason).toBe('state_incompatible');
    await newer.close();
  });

  it('a project lock held past the lock timeout is a state_busy refusal, and nothing is written', async () => {
    const key = keys[0]!;
    const s = new PgStore({ url: testDatabaseUrl(), key });
    await s.mutate((d) => {
      d.errors.push({ at: 1, message: 'first' });
      return { changed: true, result: null };
    });
    const c = new pg.Client({ connectionString: testDatabaseUrl() });
    await c.connect();
    try {
      await c.query(`begin; select seq from "oc_${key}".head for update`);
      const e = await refusalOf(
        s.mutate((d) => {
          d.errors.push({ at: 1, message: 'blocked' });
          return { changed: true, result: null };
        }),
      );
      expect(e.data?.reason).toBe('state_busy');
      await c.query('rollback');
      expect((await s.read()).errors.map((x) => x.message)).toEqual(['first']);
    } finally {
      await c.end();
      await s.close();
    }
  });

  it('a process that stalls while it holds the project lock loses it: a writer waiting behind it gets through, and the stalled change is not written', async () => {
    const key = keys[0]!;
    const s = new PgStore({ url: testDatabaseUrl(), key });
    const add = (message: string) => (d: State) => {
      d.errors.push({ at: 1, message });
      return { changed: true, result: null };
    };
    await s.mutate(add('first'));
    // A connection made as the store makes its own, stopped between the lock and its commit.
    const stalled = new pg.Client(clientConfig(testDatabaseUrl()));
    stalled.on('error', () => {});
    await stalled.connect();
    try {
      await stalled.query(`begin; select seq from "oc_${key}".head for update`);
      await stalled.query(`update "oc_${key}".head set seq = seq`);
      const started = Date.now();
      await s.mutate(add('after'));
      const waited = Date.now() - started;
      expect(waited).toBeGreaterThanOrEqual(PG_IDLE_IN_TRANSACTION_MS - 100);
      expect(waited).toBeLessThan(PG_LOCK_TIMEOUT_MS);
      await expect(stalled.query('commit')).rejects.toThrow();
      expect((await s.read()).errors.map((x) => x.message)).toEqual(['first', 'after']);
    } finally {
      await stalled.end().catch(() => {});
      await s.close();
    }
  });

  it('a wrong password is a refusal that names what to check', async () => {
    const role = `oc_test_${keys[0]}`;
    roles.push(role);
    await admin((c) => c.query(`create role "${role}" login password 'right'`));
    const s = new PgStore({ url: urlAs(role, 'wrong'), key: keys[0]! });
    const trusted = await admin(
      async (c) =>
        (
          await c.query(
            `select count(*)::int as n from pg_hba_file_rules where auth_method = 'trust' and type = 'host'`,
          )
        ).rows[0].n as number,
    );
    const r = await refusalOf(s.read());
    expect(r.data?.reason).toBe('state_unreadable');
    expect(r.message).not.toContain('wrong');
    // A server that trusts loopback lets any password in: the role then meets its missing grant.
    expect(r.message).toMatch(trusted > 0 ? /store grant/ : /refused the credentials/);
    await s.close();
  });
});
