// The password file from the real hosts (docs/postgres.md, "Install the hosts"): a project bound to a
// PostgreSQL server that asks every connection for its password (a server of the test's own), the
// hosts installed as `opencomms install` writes them, and the password only in a 0600 file the
// session's PGPASSFILE names. Claude Code 2.1.332 and Codex 0.171.0 each create a channel through
// the installed MCP server, and their installed hooks bind the session to the pinned member (both
// reach the store). For Codex the session also sets PGPASSWORD empty, which `env_vars` passes on.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { grantSql } from '../../src/cli/commands/store.ts';
import { PgStore } from '../../src/store/postgres/store.ts';
import { startOwnPostgres } from '../helpers/own-postgres.ts';
import { admin } from '../helpers/postgres.ts';
import { useCleanups } from './cleanups.ts';
import { opencomms } from './claude-harness.ts';
import {
  bin,
  claudeArgs,
  codexArgs,
  configureClaude,
  configureCodex,
  describeRun,
  run,
  trustClaudeProject,
  trustCodexProject,
  type Sandbox,
} from './env.ts';
import { startFakeAnthropic, startFakeResponses } from './fake/index.ts';

const { defer, sandbox } = useCleanups();
const create = (tool: string, channel: string) =>
  `CALL ${tool} ${JSON.stringify({ channel, role: `R-${channel}`, role_prompt: 'You test.' })}`;

/** A project bound to a password-only server of its own; the password in a 0600 file outside it. */
async function boundProject(sb: Sandbox) {
  const own = defer(await startOwnPostgres({ password: 'admin-pw', persistent: false }), (o) => o.close());
  const role = `oc_rp_${randomBytes(4).toString('hex')}`;
  const secret = `pw-${randomBytes(12).toString('hex')}`;
  const key = 'realpw';
  await admin(async (c) => {
    await c.query(grantSql(key, role));
    await c.query(`alter role "${role}" password '${secret}'`);
  }, own.url);
  const passfile = join(sb.root, 'team.pgpass');
  writeFileSync(passfile, `127.0.0.1:${own.port}:postgres:${role}:${secret}\n`, { mode: 0o600 });
  // `store init` connects to check what it binds (docs/postgres.md "What init and migrate check"):
  // the operator who runs it has the password file too.
  const env = sb.env;
  sb.env = { ...env, PGPASSFILE: passfile };
  try {
    await opencomms(sb, 'store', 'init', `postgres://${role}@127.0.0.1:${own.port}/postgres`, '--key', key);
  } finally {
    sb.env = env;
  }
  /** The channel's creator and the host session bound to it, read as the administrator. */
  const creator = async (channel: string) => {
    const view = new PgStore({ url: `postgres://postgres:admin-pw@127.0.0.1:${own.port}/postgres`, key });
    try {
      const state = await view.read();
      const m = Object.values(state.channels).find((c) => c.name === channel)?.members[0];
      return m && { member: m.session_id, bound: m.host_session_id };
    } finally {
      await view.close();
    }
  };
  return { port: own.port, passfile, secret, creator };
}

describe('the password file from the real hosts', () => {
  it('Claude Code: PGPASSFILE in the session reaches the MCP server and the hooks', async () => {
    const sb = sandbox('oc-pgpass-claude');
    const tool = 'mcp__opencomms__opencomms_create';
    const fake = defer(await startFakeAnthropic({ '[pw]': [create(tool, 'pw-claude'), 'SAY done'] }), (f) => f.close());
    const env = configureClaude(sb, fake);
    trustClaudeProject(sb, env, ['opencomms']);
    const db = await boundProject(sb);
    const pin = `sess_${randomBytes(12).toString('hex')}`;
    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install-member', '--id', pin);
    expect(readFileSync(join(sb.proj, '.mcp.json'), 'utf8')).not.toMatch(/PGPASS/);
    const r = await run(bin('claude'), claudeArgs('[pw] create', { maxTurns: 3, persist: true }), {
      cwd: sb.proj,
      env: { ...env, PGPASSFILE: db.passfile },
      timeoutMs: 90_000,
      forward: [fake.port, db.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    const toolResult = fake.requests.flatMap((q) => q.toolResults).at(-1)?.text ?? '';
    expect(toolResult).not.toMatch(/refused the credentials/);
    const c = await db.creator('pw-claude');
    expect(c?.member).toBe(pin);
    // The Stop hook (the session's environment, PGPASSFILE in it) bound the session.
    expect(c?.bound).toMatch(/^[0-9a-f-]{36}$/);
    for (const f of [join(sb.proj, '.mcp.json'), join(sb.proj, '.claude', 'settings.json')])
      expect(readFileSync(f, 'utf8')).not.toContain(db.secret);
  }, 180_000);

  it('Codex: PGPASSFILE (and an empty PGPASSWORD) in the session reach the MCP server and the hooks', async () => {
    const sb = sandbox('oc-pgpass-codex');
    const tool = 'mcp__opencomms__opencomms_create';
    const fake = defer(await startFakeResponses({ '[pw]': [create(tool, 'pw-codex'), 'SAY done'] }), (f) => f.close());
    const env = configureCodex(sb, fake);
    trustCodexProject(sb, env);
    const db = await boundProject(sb);
    const pin = `sess_${randomBytes(12).toString('hex')}`;
    await opencomms(sb, 'install', 'codex');
    await opencomms(sb, 'install-member', '--host', 'codex', '--id', pin);
    // The user's approval of the tool (`codex exec` asks no one: test/real/codex-approvals.test.ts).
    const config = join(sb.proj, '.codex', 'config.toml');
    writeFileSync(
      config,
      `${readFileSync(config, 'utf8')}\n[mcp_servers.opencomms.tools.opencomms_create]\napproval_mode = "approve"\n`,
    );
    const r = await run(bin('codex'), codexArgs('[pw] create', ['--dangerously-bypass-hook-trust']), {
      cwd: sb.proj,
      env: { ...env, PGPASSFILE: db.passfile, PGPASSWORD: '' },
      timeoutMs: 90_000,
      forward: [fake.port, db.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    const toolResult = fake.requests.flatMap((q) => q.toolResults).at(-1)?.text ?? '';
    expect(toolResult).not.toMatch(/refused the credentials/);
    const c = await db.creator('pw-codex');
    expect(c?.member).toBe(pin);
    // The Stop hook bound the thread (Codex passes hooks the session's environment).
    expect(c?.bound).toMatch(/^[0-9a-f-]{36}$/);
    expect(readFileSync(config, 'utf8')).not.toContain(db.secret);
  }, 180_000);
});
