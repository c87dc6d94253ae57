// `store init` and `store migrate --to <url>` check everything they can before they write anything
// (docs/postgres.md, "What init and migrate check"), on real servers: the machine's (or the
// tests') PostgreSQL, and one of this file's own with TLS on. Each refusal is one `--json`
// document with a stable reason and code; a refused init leaves the binding as it was, and a
// refused migrate leaves the target schema as it found it and the project's files untouched.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { grantSql } from '../../../src/cli/commands/store.ts';
import { openRuntime } from '../../../src/runtime/runtime.ts';
import { cli, IDS, liveProject } from '../../cli/fixtures.ts';
import { startOwnPostgres, type OwnPostgres } from '../../helpers/own-postgres.ts';
import { admin, dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';
import { tempProject } from '../../helpers/store-fixtures.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The test server's URL as `user` (default: the URL's own), with `password` when given. */
const urlAs = (user?: string, password?: string, base = testDatabaseUrl()) => {
  const u = new URL(base);
  if (user) u.username = user;
  u.password = password ?? '';
  return u.toString();
};

const key = () => {
  const k = newProjectKey('pf');
  cleanups.push(() => dropProject(k));
  return k;
};

const folder = async () => {
  const t = await tempProject();
  cleanups.push(t.cleanup);
  return t.dir;
};

const role = async (name: string, sql = '') => {
  await admin((c) => c.query(`drop role if exists "${name}"; create role "${name}" login; ${sql}`));
  cleanups.push(() => admin(async (c) => void (await c.query(`drop role if exists "${name}"`))));
  return name;
};

const bindingOf = (dir: string) => {
  const f = join(dir, '.opencomms', 'store.json');
  return existsSync(f) ? readFileSync(f, 'utf8') : null;
};

/** What a project key holds on a server: whether its schema exists, its head, and its rows. */
async function target(k: string, url = testDatabaseUrl()) {
  return admin(async (c) => {
    const s = `"oc_${k}"`;
    const there = (await c.query(`select to_regnamespace('${s}') is not null as there`)).rows[0].there as boolean;
    if (!there) return { schema: false };
    const laid = (await c.query(`select to_regclass('${s}.head') is not null as laid`)).rows[0].laid as boolean;
    if (!laid) return { schema: true, laid: false };
    const head = (await c.query(`select seq, retired from ${s}.head`)).rows[0];
    const count = async (t: string) => Number((await c.query(`select count(*) from ${s}.${t}`)).rows[0].count);
    return {
      schema: true,
      head,
      changes: await count('changes'),
      snapshots: await count('snapshots'),
      history: await count('history'),
      archives: await count('archives'),
    };
  }, url);
}

/** Every file under the project's .opencomms/ with its bytes. */
function filesOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    if (!existsSync(d)) return;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (!e.name.startsWith('.state.lock') && !e.name.startsWith('sessions')) out[p] = readFileSync(p, 'utf8');
    }
  };
  walk(join(dir, '.opencomms'));
  return out;
}

/** A refusal as one --json document: its reason and code, never internal_error. */
async function refused(args: string[], reason: string, code: string) {
  const r = await cli(...args, '--json');
  expect(r.code).not.toBe(0);
  const doc = r.json();
  expect(doc).toMatchObject({ ok: false, data: { reason, code } });
  expect(doc.message).not.toMatch(/internal error|\n/);
  expect(doc.message).not.toContain('secret');
  return doc;
}

/** `store init`, refused: the binding is what it was before. */
async function initRefused(dir: string, url: string, k: string, reason: string, code: string) {
  const before = bindingOf(dir);
  const doc = await refused(['store', 'init', url, '--key', k, '--project', dir], reason, code);
  expect(bindingOf(dir)).toBe(before);
  return doc;
}

/** `store migrate --to`, refused: the target as it was, the files and the binding untouched. */
async function migrateRefused(dir: string, url: string, k: string, reason: string, code: string, base?: string) {
  const [files, at] = [filesOf(dir), await target(k, base)];
  const doc = await refused(['store', 'migrate', '--to', url, '--key', k, '--project', dir], reason, code);
  expect(await target(k, base)).toEqual(at);
  expect(filesOf(dir)).toEqual(files);
  expect(bindingOf(dir)).toBeNull();
  return doc;
}

describe('store init checks before it binds', () => {
  it('refuses a URL that is not postgres://, or not a URL, or holds a password', async () => {
    const [dir, k] = [await folder(), key()];
    const at = new URL(testDatabaseUrl());
    await initRefused(dir, `http://${at.host}${at.pathname}`, k, 'invalid_argument', 'url_scheme');
    await initRefused(dir, 'not a url', k, 'invalid_argument', 'url_unparsable');
    await initRefused(dir, urlAs(undefined, 'secret'), k, 'invalid_argument', 'url_password');
    expect(await target(k)).toEqual({ schema: false });
  });

  it('refuses a server that cannot be reached, and a server without TLS when the URL asks for it', async () => {
    const [dir, k] = [await folder(), key()];
    await initRefused(dir, 'postgres://postgres@127.0.0.1:1/test', k, 'state_unreadable', 'ECONNREFUSED');
    const noSsl = await admin(async (c) => (await c.query('show ssl')).rows[0].ssl === 'off');
    if (noSsl) {
      const doc = await initRefused(dir, `${urlAs()}?sslmode=verify-full`, k, 'state_unreadable', 'tls_unsupported');
      expect(doc.message).toMatch(/does not accept TLS/);
    }
    await initRefused(dir, urlAs().replace(/\/[^/?]*$/, '/oc_no_such_database'), k, 'state_unreadable', 'no_database');
    const badKey = await cli('store', 'init', urlAs(), '--key', 'Not A Key', '--json', '--project', dir);
    expect(badKey.json()).toMatchObject({ ok: false, data: { reason: 'invalid_argument' } });
    expect(bindingOf(dir)).toBeNull();
    await initRefused(
      dir,
      `${urlAs()}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem`,
      k,
      'invalid_argument',
      'tls_file',
    );
  });

  it('refuses a role without the grant, and binds one with it', async () => {
    const [dir, k] = [await folder(), key()];
    const bare = await role(`oc_pf_bare_${k}`);
    const doc = await initRefused(dir, urlAs(bare), k, 'state_unreadable', 'no_grant');
    expect(doc.message).toContain(`opencomms store grant --role ${bare} --key ${k}`);
    const granted = `oc_pf_ok_${k}`;
    cleanups.push(() =>
      admin(
        async (c) => void (await c.query(`drop schema if exists "oc_${k}" cascade; drop role if exists "${granted}"`)),
      ),
    );
    await admin(async (c) => {
      for (const stmt of grantSql(k, granted)
        .split('\n')
        .filter((l) => l && !l.startsWith('--')))
        await c.query(stmt);
    });
    const ok = await cli('store', 'init', urlAs(granted), '--key', k, '--json', '--project', dir);
    expect(ok.json()).toMatchObject({ ok: true, data: { key: k } });
    expect(JSON.parse(bindingOf(dir)!)).toEqual({ kind: 'postgres', url: urlAs(granted), key: k });
    // Once bound, a refused init leaves the binding as it was.
    await initRefused(dir, urlAs(bare), k, 'state_unreadable', 'no_grant');
  });

  it('refuses a project whose state lives in its files, naming `store migrate`; binds an empty one', async () => {
    const [dir, k] = [await folder(), key()];
    await liveProject(dir);
    const doc = await initRefused(dir, urlAs(), k, 'state_incompatible', 'files_hold_project');
    expect(doc.message).toContain(`opencomms store migrate --to '${urlAs()}' --key ${k}`);
    const channels = (await cli('status', '--json', '--project', dir)).json().data.channels as Array<{ name: string }>;
    expect(channels.map((c) => c.name).sort()).toEqual(['empty', 'team']);
    expect(await target(k)).toEqual({ schema: false });
    const empty = await folder();
    expect((await cli('channels', '--json', '--project', empty)).code).toBe(0);
    expect((await cli('store', 'init', urlAs(), '--key', k, '--json', '--project', empty)).json().ok).toBe(true);
  });

  it('refuses a key retired by `migrate --to file`, saying where the project went; `store status` of a folder bound to it says the same', async () => {
    const [dir, k] = [await folder(), key()];
    await liveProject(dir);
    expect((await cli('store', 'migrate', '--to', urlAs(), '--key', k, '--json', '--project', dir)).json().ok).toBe(
      true,
    );
    // A second machine's folder, bound while the project lived on PostgreSQL.
    const joined = await folder();
    const bound = await cli('store', 'init', urlAs(), '--key', k, '--json', '--project', joined);
    expect(bound.json()).toMatchObject({ ok: true, data: { key: k, head: 1 } });
    expect((await cli('store', 'migrate', '--to', 'file', '--json', '--project', dir)).json().ok).toBe(true);
    const other = await folder();
    const doc = await initRefused(other, urlAs(), k, 'state_incompatible', 'key_retired');
    expect(doc.data.retired).toBe(true);
    expect(doc.message).toContain(`moved to the files at`);
    expect(doc.message).toContain(dir);
    const st = await refused(['store', 'status', '--project', joined], 'state_incompatible', 'key_retired');
    expect(st.message).toContain(dir);
    expect(st.message).not.toMatch(/restart/i);
    expect(st.message).toContain('opencomms store init');
  });

  it('replaces a binding that does not parse, once the new one checks out', async () => {
    const dir = await folder();
    mkdirSync(join(dir, '.opencomms'), { recursive: true });
    writeFileSync(join(dir, '.opencomms', 'store.json'), '{"kind": "postgres"');
    await initRefused(dir, 'postgres://postgres@127.0.0.1:1/test', key(), 'state_unreadable', 'ECONNREFUSED');
    const k = key();
    expect((await cli('store', 'init', urlAs(), '--key', k, '--json', '--project', dir)).json().ok).toBe(true);
    expect(JSON.parse(bindingOf(dir)!)).toEqual({ kind: 'postgres', url: urlAs(), key: k });
  });
});

describe('store migrate --to checks before it copies', () => {
  it('a URL with a password is refused before a row is written; the retry without it moves the project', async () => {
    const [dir, k] = [await folder(), key()];
    await liveProject(dir);
    await migrateRefused(dir, urlAs(undefined, 'secret'), k, 'invalid_argument', 'url_password');
    expect(await target(k)).toEqual({ schema: false });
    const r = await cli('store', 'migrate', '--to', urlAs(), '--key', k, '--json', '--project', dir);
    expect(r.json()).toMatchObject({ ok: true, data: { key: k, channels: 3 } });
  });

  it('a URL that is not postgres://, a server that cannot be reached or has no TLS, a role without the grant: the target as it was', async () => {
    const [dir, k] = [await folder(), key()];
    await liveProject(dir);
    const at = new URL(testDatabaseUrl());
    await migrateRefused(dir, `http://${at.host}${at.pathname}`, k, 'invalid_argument', 'url_scheme');
    // A slip for `file`, with no key: the URL is what is wrong.
    const slip = await refused(
      ['store', 'migrate', '--to', 'files', '--project', dir],
      'invalid_argument',
      'url_unparsable',
    );
    expect(slip.message).toContain('or `file`');
    await migrateRefused(dir, 'postgres://postgres@127.0.0.1:1/test', k, 'state_unreadable', 'ECONNREFUSED');
    if (await admin(async (c) => (await c.query('show ssl')).rows[0].ssl === 'off'))
      await migrateRefused(dir, `${urlAs()}?sslmode=verify-full`, k, 'state_unreadable', 'tls_unsupported');
    const bare = await role(`oc_pf_bare_${k}`);
    await migrateRefused(dir, urlAs(bare), k, 'state_unreadable', 'no_grant');
    // The role owns the schema, laid out already by another folder's binding: the grant holds, the
    // schema stays as it is when the key is taken.
    expect(await target(k)).toEqual({ schema: false });
  });

  it('a key holding a live project, or a retired one, is refused and left as it was', async () => {
    const [dir, k] = [await folder(), key()];
    await liveProject(dir);
    expect((await cli('store', 'migrate', '--to', urlAs(), '--key', k, '--json', '--project', dir)).json().ok).toBe(
      true,
    );
    const second = await folder();
    await liveProject(second);
    await migrateRefused(second, urlAs(), k, 'invalid_argument', 'key_taken');
    expect((await cli('store', 'migrate', '--to', 'file', '--json', '--project', dir)).json().ok).toBe(true);
    const doc = await migrateRefused(second, urlAs(), k, 'invalid_argument', 'key_retired');
    expect(doc.message).toMatch(/already holds a project \(retired: it moved to the files at/);
  });

  it('a project laid out by a newer OpenComms is refused and left as it was', async () => {
    const [dir, k] = [await folder(), key()];
    await liveProject(dir);
    const empty = await folder();
    expect((await cli('store', 'init', urlAs(), '--key', k, '--json', '--project', empty)).json().ok).toBe(true);
    expect((await cli('store', 'status', '--json', '--project', empty)).json().ok).toBe(true);
    await admin((c) => c.query(`update "oc_${k}".meta set layout = 99`));
    await migrateRefused(dir, urlAs(), k, 'state_incompatible', 'newer_layout');
    await initRefused(await folder(), urlAs(), k, 'state_incompatible', 'newer_layout');
  });
});

describe('TLS on a server of its own', () => {
  let own: OwnPostgres;
  let certs: string;
  const PASSWORD = 'own-admin-pw';
  const saved = process.env.PGPASSWORD;
  /** The own server's URL with no password (PGPASSWORD gives it) and these TLS parameters. */
  const tlsUrl = (host: string, params: string) => `postgres://postgres@${host}:${own.port}/postgres?${params}`;

  beforeAll(async () => {
    own = await startOwnPostgres({ password: PASSWORD, persistent: false });
    certs = mkdtempSync(join(tmpdir(), 'oc-pf-tls-'));
    // A self-signed certificate (its own CA) for 127.0.0.1 and db.test, not for localhost.
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=db.test',
        '-addext',
        'subjectAltName=DNS:db.test,IP:127.0.0.1',
        '-keyout',
        join(certs, 'server.key'),
        '-out',
        join(certs, 'server.crt'),
      ],
      { stdio: 'ignore' },
    );
    const c = new pg.Client(own.url);
    await c.connect();
    const data = (await c.query<{ data_directory: string }>('show data_directory')).rows[0]!.data_directory;
    const { uid, gid } = statSync(data);
    for (const [f, mode] of [
      ['server.crt', 0o644],
      ['server.key', 0o600],
    ] as const) {
      writeFileSync(join(data, f), readFileSync(join(certs, f)), { mode });
      chownSync(join(data, f), uid, gid);
    }
    await c.query('alter system set ssl = on');
    await c.query('select pg_reload_conf()');
    await c.end();
    process.env.PGPASSWORD = PASSWORD;
    // The postmaster reads the configuration on SIGHUP: wait until TLS is offered.
    for (let i = 0; i < 100; i++) {
      const probe = new pg.Client({ connectionString: own.url, ssl: { rejectUnauthorized: false } });
      probe.on('error', () => {});
      const up = await probe.connect().then(
        () => true,
        () => false,
      );
      await probe.end().catch(() => {});
      if (up) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('ssl was not turned on');
  }, 120_000);
  afterAll(async () => {
    if (saved === undefined) delete process.env.PGPASSWORD;
    else process.env.PGPASSWORD = saved;
    await own?.close();
    if (certs) rmSync(certs, { recursive: true, force: true });
  });

  it('a certificate no CA of the URL signed, or for another host, is refused; the right CA binds', async () => {
    const [dir, k] = [await folder(), newProjectKey('pf')];
    const doc = await initRefused(
      dir,
      tlsUrl('127.0.0.1', 'sslmode=verify-full'),
      k,
      'state_unreadable',
      'tls_certificate',
    );
    expect(doc.message).toMatch(/sslrootcert=<file>/);
    const ca = join(certs, 'server.crt');
    const otherHost = tlsUrl('localhost', `sslmode=verify-full&sslrootcert=${ca}`);
    await initRefused(dir, otherHost, k, 'state_unreadable', 'tls_certificate');
    const good = tlsUrl('127.0.0.1', `sslmode=verify-full&sslrootcert=${ca}`);
    // This server asks every connection for its password.
    process.env.PGPASSWORD = 'not-the-password';
    try {
      await initRefused(dir, good, k, 'state_unreadable', 'credentials');
    } finally {
      process.env.PGPASSWORD = PASSWORD;
    }
    const r = await cli('store', 'init', good, '--key', k, '--json', '--project', dir);
    expect(r.json()).toMatchObject({ ok: true, data: { key: k } });
  });

  it('a migrate whose TLS fails leaves the target as it was; over verified TLS it moves', async () => {
    const [dir, k] = [await folder(), newProjectKey('pf')];
    await liveProject(dir);
    await migrateRefused(
      dir,
      tlsUrl('127.0.0.1', 'sslmode=verify-full'),
      k,
      'state_unreadable',
      'tls_certificate',
      own.url,
    );
    expect(await target(k, own.url)).toEqual({ schema: false });
    const good = tlsUrl('127.0.0.1', `sslmode=verify-full&sslrootcert=${join(certs, 'server.crt')}`);
    const r = await cli('store', 'migrate', '--to', good, '--key', k, '--json', '--project', dir);
    expect(r.json()).toMatchObject({ ok: true, data: { key: k } });
    expect(await target(k, own.url)).toMatchObject({ schema: true, head: { seq: '1', retired: null } });
  });
});

it('a change holding U+0000, which PostgreSQL cannot store, is a refusal that says so; nothing is written', async () => {
  const [dir, k] = [await folder(), key()];
  await liveProject(dir);
  expect((await cli('store', 'migrate', '--to', urlAs(), '--key', k, '--json', '--project', dir)).json().ok).toBe(true);
  const before = await target(k);
  const rt = openRuntime(dir);
  try {
    const r = await rt.run({
      op: 'send',
      sid: IDS.lead,
      args: { channel: 'team', content: 'a\u0000b', to: 'Reviewer' },
    });
    expect(r).toMatchObject({ ok: false, data: { reason: 'invalid_argument', code: 'nul_character' } });
    expect(r.message).toMatch(/U\+0000/);
  } finally {
    await rt.close();
  }
  expect(await target(k)).toEqual(before);
});

it('a copy that fails after laying the schema out leaves no schema behind (the layout is part of the copy)', async () => {
  const [dir, k] = [await folder(), key()];
  await liveProject(dir);
  const s = `oc_${k}`;
  // A failure injected into the copy's last inserts: when the key's archives table is created, an
  // event trigger gives it a trigger that refuses every row.
  const fn = `oc_pf_fail_${k}`;
  await admin((c) =>
    c.query(`create function "${fn}_row"() returns trigger language plpgsql as $f$
        begin raise exception 'injected failure' using errcode = 'XX042'; end $f$;
      create function "${fn}"() returns event_trigger language plpgsql as $f$
        begin
          if exists (select 1 from pg_event_trigger_ddl_commands() d
              where d.command_tag = 'CREATE TABLE' and d.object_identity = '${s}.archives') then
            create trigger refuse_rows before insert on "${s}".archives for each row execute function "${fn}_row"();
          end if;
        end $f$;
      create event trigger "${fn}" on ddl_command_end when tag in ('CREATE TABLE') execute function "${fn}"();`),
  );
  try {
    const [files, at] = [filesOf(dir), await target(k)];
    expect(at).toEqual({ schema: false });
    const r = await cli('store', 'migrate', '--to', urlAs(), '--key', k, '--json', '--project', dir);
    expect(r.json().ok).toBe(false);
    expect(await target(k)).toEqual(at);
    expect(filesOf(dir)).toEqual(files);
    expect(bindingOf(dir)).toBeNull();
  } finally {
    await admin((c) =>
      c.query(
        `drop event trigger if exists "${fn}"; drop function if exists "${fn}"(); drop function if exists "${fn}_row"() cascade;`,
      ),
    );
  }
  const again = await cli('store', 'migrate', '--to', urlAs(), '--key', k, '--json', '--project', dir);
  expect(again.json()).toMatchObject({ ok: true, data: { key: k, archives: 1 } });
});

it("sslmode=require, prefer or verify-ca prints no warning of pg's on stderr: a command's stderr is its one line", () => {
  const dir = mkdtempSync(join(tmpdir(), 'oc-pf-sslmode-'));
  try {
    for (const mode of ['require', 'prefer', 'verify-ca']) {
      const r = spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          join(__dirname, '../../../src/cli/main.ts'),
          'store',
          'init',
          `postgres://postgres@127.0.0.1:1/test?sslmode=${mode}`,
          '--key',
          'k1',
          '--json',
          '--project',
          dir,
        ],
        { encoding: 'utf8', timeout: 60_000, cwd: join(__dirname, '../../..') },
      );
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, data: { reason: 'state_unreadable' } });
      expect(r.stderr).not.toMatch(/SECURITY WARNING|Warning/);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it('the grant SQL says which of its statements changes the whole database', () => {
  const lines = grantSql('k1', 'r1').split('\n');
  const revoke = lines.indexOf('revoke create on schema public from public;');
  expect(revoke).toBeGreaterThan(0);
  expect(lines[revoke - 1]).toMatch(/^-- Database-wide .*Leave it out if/);
});
