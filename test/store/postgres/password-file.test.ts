// The password file (~/.pgpass, or the file PGPASSFILE names) from every entry point a host starts,
// on a server of the test's own whose every connection needs a password (docs/postgres.md,
// "Setting it up for a team"). An empty PGPASSWORD or PGPASSFILE counts as unset, as libpq counts
// it: Codex passes a variable its `env_vars` lists even when the session set it empty. Each process
// reads the file without a word on stderr: `pg`'s own reading of it prints a DeprecationWarning
// there, and a Claude Code wake waiter's stderr is the text the model is woken with.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grantSql } from '../../../src/cli/commands/store.ts';
import { RefusalError } from '../../../src/protocol/result.ts';
import { openRuntime } from '../../../src/runtime/runtime.ts';
import { clientConfig } from '../../../src/store/postgres/connect.ts';
import { wireTarget } from '../../../src/store/postgres/glance.ts';
import { passwordFromFile } from '../../../src/store/postgres/password.ts';
import { cli } from '../../cli/fixtures.ts';
import { startOwnPostgres, type OwnPostgres } from '../../helpers/own-postgres.ts';
import { admin } from '../../helpers/postgres.ts';
import { tempProject } from '../../helpers/store-fixtures.ts';

const DEPRECATION = /DeprecationWarning|pgpass support is deprecated/;
const OFF_LOOPBACK = 'postgres://oc_team@db.example.com:5432/opencomms?sslmode=verify-full';

/** A directory that is removed after the file's tests. */
const scratch: string[] = [];
const dirOf = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(d);
  return d;
};
afterAll(() => {
  for (const d of scratch) rmSync(d, { recursive: true, force: true });
});

describe('the credentials check of a server off loopback', () => {
  const refusal = (env: NodeJS.ProcessEnv) => {
    try {
      clientConfig(OFF_LOOPBACK, env);
      return null;
    } catch (e) {
      if (e instanceof RefusalError) return e.refusal.message;
      throw e;
    }
  };

  it('takes ~/.pgpass when PGPASSFILE or PGPASSWORD is set but empty', () => {
    const home = dirOf('oc-pgpass-home-');
    writeFileSync(join(home, '.pgpass'), 'db.example.com:5432:opencomms:oc_team:pw\n', { mode: 0o600 });
    expect(refusal({ HOME: home, PGPASSFILE: '' })).toBeNull();
    expect(refusal({ HOME: home, PGPASSFILE: '', PGPASSWORD: '' })).toBeNull();
  });

  it('refuses when no source holds a password: an empty PGPASSWORD is none', () => {
    const home = dirOf('oc-pgpass-empty-home-');
    expect(refusal({ HOME: home, PGPASSFILE: '', PGPASSWORD: '' })).toMatch(/needs a user and credentials/);
  });

  it('takes the file PGPASSFILE names', () => {
    const home = dirOf('oc-pgpass-home2-');
    const file = join(dirOf('oc-pgpass-file-'), 'team.pgpass');
    writeFileSync(file, 'db.example.com:5432:opencomms:oc_team:pw\n', { mode: 0o600 });
    expect(refusal({ HOME: home, PGPASSFILE: file })).toBeNull();
  });
});

it("the hook runner's glance takes an empty PGPASSWORD for none (and so offers the server no password)", () => {
  expect(wireTarget('postgres://u@127.0.0.1:5432/db', { PGPASSWORD: '' })?.password).toBeUndefined();
  expect(wireTarget('postgres://u@127.0.0.1:5432/db', { PGPASSWORD: 'pw' })?.password).toBe('pw');
});

describe('reading a password file as libpq does', () => {
  const at = { host: 'db.example.com', port: 5432, database: 'opencomms', user: 'oc_team' };
  const file = (text: string, mode = 0o600) => {
    const f = join(dirOf('oc-pgpass-read-'), 'pgpass');
    writeFileSync(f, text, { mode });
    return f;
  };

  it('the first line that matches wins; * matches any field; comments and short lines are skipped', () => {
    const f = file(
      [
        '# team servers',
        'other.example.com:5432:opencomms:oc_team:not-this',
        'db.example.com:5432:opencomms:oc_team:first',
        '*:*:*:*:second',
      ].join('\n'),
    );
    expect(passwordFromFile(f, at)).toBe('first');
    expect(passwordFromFile(f, { ...at, user: 'someone' })).toBe('second');
  });

  it('a backslash escapes a colon or a backslash, in the password as in the other fields', () => {
    const f = file('db.example.com:5432:open\\:comms:oc_team:p\\:w\\\\x\r\n');
    expect(passwordFromFile(f, { ...at, database: 'open:comms' })).toBe('p:w\\x');
  });

  it('localhost stands for a Unix socket or no host; the port defaults to 5432', () => {
    const f = file('localhost:5432:opencomms:oc_team:local\n');
    expect(passwordFromFile(f, { ...at, host: '/var/run/postgresql' })).toBe('local');
    expect(passwordFromFile(f, { ...at, host: undefined, port: undefined })).toBe('local');
  });

  it.skipIf(process.platform === 'win32')('a file group or others may read is ignored, as libpq ignores it', () => {
    expect(passwordFromFile(file('*:*:*:*:open\n', 0o644), at)).toBeUndefined();
  });

  it('no file, no match: undefined', () => {
    expect(passwordFromFile(join(tmpdir(), `oc-none-${randomBytes(4).toString('hex')}`), at)).toBeUndefined();
    expect(passwordFromFile(file('db.example.com:5433:opencomms:oc_team:x\n'), at)).toBeUndefined();
  });
});

describe('a project on a server that asks every connection for its password', () => {
  const SECRET = `pw-${randomBytes(12).toString('hex')}`;
  const ROLE = `oc_pf_${randomBytes(4).toString('hex')}`;
  const KEY = 'passfile';
  let own: OwnPostgres;
  let project: { dir: string; cleanup: () => Promise<void> };
  /** The user's home as the hosts see it, without ~/.pgpass (a test adds one where it says so). */
  let home: string;
  let passfile: string;

  beforeAll(async () => {
    own = await startOwnPostgres({ password: 'admin-pw', persistent: false });
    await admin(async (c) => {
      await c.query(grantSql(KEY, ROLE));
      await c.query(`alter role "${ROLE}" password '${SECRET}'`);
    }, own.url);
    project = await tempProject();
    home = dirOf('oc-pf-home-');
    passfile = join(dirOf('oc-pf-secrets-'), 'team.pgpass');
    writeFileSync(passfile, `127.0.0.1:${own.port}:postgres:${ROLE}:${SECRET}\n`, { mode: 0o600 });
    const p = project.dir;
    // `store init` connects to check what it binds: the password is at hand where it runs.
    const savedPassfile = process.env.PGPASSFILE;
    process.env.PGPASSFILE = passfile;
    try {
      expect(
        (await cli('store', 'init', `postgres://${ROLE}@127.0.0.1:${own.port}/postgres`, '--key', KEY, '--project', p))
          .code,
      ).toBe(0);
    } finally {
      if (savedPassfile === undefined) delete process.env.PGPASSFILE;
      else process.env.PGPASSFILE = savedPassfile;
    }
    for (const host of ['claude-code', 'codex']) {
      expect(
        (
          await cli(
            'install-member',
            '--host',
            host,
            '--id',
            `sess_${host === 'codex' ? 'c' : 'a'}${'0'.repeat(23)}`,
            '--project',
            p,
          )
        ).code,
      ).toBe(0);
      expect((await cli('install', host, '--project', p)).code).toBe(0);
    }
  }, 120_000);
  afterAll(async () => {
    await own?.close();
    await project?.cleanup();
  });

  const hostBase = () => ({ PATH: process.env.PATH ?? '', HOME: home });

  /** Claude Code 2.1.332 starts a project's MCP server with the session's whole environment, over
   *  which the entry's `env` values go, `${VAR:-default}` expanded (test/real/mcp-env.test.ts). */
  function claudeSpec(session: Record<string, string>) {
    const entry = JSON.parse(readFileSync(join(project.dir, '.mcp.json'), 'utf8')).mcpServers.opencomms;
    const expand = (v: string) =>
      v.replace(
        /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g,
        (m, name: string, def?: string) => session[name] ?? def ?? m,
      );
    const env = Object.fromEntries(Object.entries(entry.env as Record<string, string>).map(([k, v]) => [k, expand(v)]));
    return { command: entry.command, args: entry.args, cwd: project.dir, env: { ...hostBase(), ...session, ...env } };
  }

  /** Codex 0.171.0 gives a project's MCP server HOME, PATH and the like, the entry's `env`, and each
   *  variable of `env_vars` the session sets, an empty one included (test/real/mcp-env.test.ts). */
  function codexSpec(session: Record<string, string>) {
    const entry = (parseToml(readFileSync(join(project.dir, '.codex', 'config.toml'), 'utf8')) as any).mcp_servers
      .opencomms;
    const passed = Object.fromEntries(
      (entry.env_vars as string[]).filter((v) => session[v] !== undefined).map((v) => [v, session[v]!]),
    );
    return {
      command: entry.command,
      args: entry.args,
      cwd: join(project.dir, entry.cwd),
      env: { ...hostBase(), ...entry.env, ...passed },
    };
  }

  /** One `opencomms_status` call through the server as the host starts it, and the server's stderr.
   *  The member is on no channel yet, so a server that read the store answers `identity_not_member`;
   *  one that could not reach it answers `state_unreadable`. */
  async function status(spec: { command: string; args: string[]; cwd: string; env: Record<string, string> }) {
    const transport = new StdioClientTransport({ ...spec, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (d) => (stderr += d));
    const client = new Client({ name: 'host', version: '0.0.0' });
    await client.connect(transport);
    try {
      const r = (await client.callTool({ name: 'opencomms_status', arguments: {} })) as {
        content: Array<{ text: string }>;
      };
      return {
        answer: JSON.parse(r.content[0]!.text) as { ok: boolean; message: string; data?: { reason?: string } },
        stderr: () => stderr,
      };
    } finally {
      await client.close();
    }
  }

  it("Claude Code's installed entry injects no password variable: the session's own reach the server", () => {
    const entry = JSON.parse(readFileSync(join(project.dir, '.mcp.json'), 'utf8')).mcpServers.opencomms;
    expect(Object.keys(entry.env)).not.toContain('PGPASSWORD');
    expect(Object.keys(entry.env)).not.toContain('PGPASSFILE');
  });

  it("Claude Code's MCP server with PGPASSFILE in the session, and with ~/.pgpass: the store read, nothing on stderr", async () => {
    const viaFile = await status(claudeSpec({ PGPASSFILE: passfile }));
    expect(viaFile.answer.message).not.toMatch(/refused the credentials/);
    expect(viaFile.answer.data?.reason).toBe('identity_not_member');
    const pgpass = join(home, '.pgpass');
    writeFileSync(pgpass, readFileSync(passfile), { mode: 0o600 });
    try {
      const viaHome = await status(claudeSpec({}));
      expect(viaHome.answer.data?.reason).toBe('identity_not_member');
      expect(viaHome.stderr()).not.toMatch(DEPRECATION);
    } finally {
      rmSync(pgpass);
    }
    expect(viaFile.stderr()).not.toMatch(DEPRECATION);
  }, 60_000);

  it("Codex's MCP server with PGPASSFILE and an empty PGPASSWORD in the session: the store read, nothing on stderr", async () => {
    const r = await status(codexSpec({ PGPASSFILE: passfile, PGPASSWORD: '' }));
    expect(r.answer.message).not.toMatch(/refused the credentials/);
    expect(r.answer.data?.reason).toBe('identity_not_member');
    expect(r.stderr()).not.toMatch(DEPRECATION);
  }, 60_000);

  /** The operator's side, in this process (its password from PGPASSWORD while `fn` runs). */
  async function asOperator<T>(fn: (rt: ReturnType<typeof openRuntime>) => Promise<T>): Promise<T> {
    const saved = process.env.PGPASSWORD;
    process.env.PGPASSWORD = SECRET;
    const rt = openRuntime(project.dir, { log: () => {} });
    try {
      return await fn(rt);
    } finally {
      await rt.close();
      if (saved === undefined) delete process.env.PGPASSWORD;
      else process.env.PGPASSWORD = saved;
    }
  }
  const caller = (sid: string) => ({
    session_id: sid,
    host: 'claude-code',
    surface: 'mcp',
    delivery_mode: 'pull',
    host_session_id: null,
    project_id: 'local-project',
    worktree: project.dir,
  });
  const ME = `sess_a${'0'.repeat(23)}`;
  const must = async (p: Promise<{ ok: boolean; message: string }>) => {
    const r = await p;
    expect(r.ok, r.message).toBe(true);
  };

  it('the hook runner as settings.json names it, with PGPASSFILE (and an empty PGPASSWORD): binds the session, nothing on stderr', async () => {
    await asOperator(async (rt) => {
      await must(
        rt.run({
          op: 'create',
          caller: caller('sess_peer'),
          args: { channel: 'hooks', role: 'Lead', role_prompt: 'Lead.' },
        }),
      );
      await must(
        rt.run({ op: 'join', caller: caller(ME), args: { channel: 'hooks', role: 'Worker', role_prompt: 'Work.' } }),
      );
    });
    const boundTo = () =>
      asOperator(async (rt) => {
        const s = await rt.read();
        return Object.values(s.channels).flatMap((c) =>
          c.members.filter((m) => m.session_id === ME).map((m) => m.host_session_id),
        );
      });
    const settings = JSON.parse(readFileSync(join(project.dir, '.claude', 'settings.json'), 'utf8'));
    const command = settings.hooks.SessionStart[0].hooks[0].command as string;
    for (const [sessionId, session] of [
      ['6f1c2a3b-0000-4000-8000-00000000a001', { PGPASSFILE: passfile }],
      ['6f1c2a3b-0000-4000-8000-00000000a002', { PGPASSFILE: passfile, PGPASSWORD: '' }],
    ] as const) {
      const r = spawnSync('sh', ['-c', command], {
        cwd: project.dir,
        env: { ...hostBase(), CLAUDE_PROJECT_DIR: project.dir, ...session },
        input: JSON.stringify({
          hook_event_name: 'SessionStart',
          session_id: sessionId,
          cwd: project.dir,
          source: 'startup',
        }),
        encoding: 'utf8',
      });
      expect(r.status).toBe(0);
      expect(r.stderr).not.toMatch(DEPRECATION);
      expect(await boundTo()).toEqual([sessionId]);
      // The session ends (SessionEnd marks it stale), so the next one may take the member.
      await asOperator((rt) => must(rt.run({ op: 'mark_stale', session: sessionId })));
    }
  }, 60_000);

  it('a wake waiter that reads the password file wakes with the framed batch alone on stderr', async () => {
    await asOperator(async (rt) => {
      await must(
        rt.run({
          op: 'create',
          caller: caller('sess_peer'),
          args: { channel: 'wake', role: 'Lead', role_prompt: 'Lead.' },
        }),
      );
      await must(
        rt.run({ op: 'join', caller: caller(ME), args: { channel: 'wake', role: 'Worker', role_prompt: 'Work.' } }),
      );
      await must(rt.run({ op: 'bind', member: ME, host: 'claude-code', host_session_id: 'claude-wake-1' }));
      await must(rt.run({ op: 'send', sid: 'sess_peer', args: { channel: 'wake', content: 'read me' } }));
    });
    const claude = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      const tmp = join(home, 'tmp');
      mkdirSync(tmp, { recursive: true });
      const proc = spawn(process.execPath, [join(project.dir, '.opencomms', 'claude-code-hooks.mjs'), 'wait'], {
        cwd: project.dir,
        env: {
          ...hostBase(),
          CLAUDE_PROJECT_DIR: project.dir,
          CLAUDE_PID: String(claude.pid),
          CLAUDE_CODE_ENTRYPOINT: 'cli',
          TMPDIR: tmp,
          PGPASSFILE: passfile,
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      proc.stdin!.end(
        JSON.stringify({
          hook_event_name: 'Stop',
          session_id: 'claude-wake-1',
          cwd: project.dir,
          stop_hook_active: false,
        }),
      );
      let err = '';
      proc.stderr!.on('data', (d) => (err += d));
      const code = await Promise.race([
        new Promise<number | null>((r) => proc.on('exit', (c) => r(c))),
        new Promise<'pending'>((r) => setTimeout(() => r('pending'), 15_000)),
      ]);
      if (code === 'pending') proc.kill('SIGKILL');
      expect(code).toBe(2);
      expect(err).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nread me\n<<<END_UNTRUSTED_PEER_MESSAGE>>>');
      expect(err).not.toMatch(DEPRECATION);
    } finally {
      claude.kill('SIGKILL');
    }
  }, 60_000);
});
