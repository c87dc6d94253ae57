// One identity per session on the real binaries (docs/installers.md, "Member ids"): after
// `install <host>` and two `install-member` runs, a session started without OPENCOMMS_MEMBER_ID runs
// its MCP server as the first pinned member and a session started with OPENCOMMS_MEMBER_ID=<second>
// as the second. Each session creates a channel through the installed server; the channel's member
// row says which identity the server had. Claude Code 2.1.332 expands `${OPENCOMMS_MEMBER_ID:-<pin>}`
// in `.mcp.json`; Codex 0.171.0 passes the variable through `env_vars`.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
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
} from './env.ts';
import { startFakeAnthropic, startFakeResponses } from './fake/index.ts';
import { opencomms } from './claude-harness.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;
const create = (tool: string, channel: string) =>
  `CALL ${tool} ${JSON.stringify({ channel, role: `R-${channel}`, role_prompt: 'You test.' })}`;

/** The member each channel's creator ran as. */
async function creators(proj: string, channels: string[]) {
  const rt = openRuntime(proj, { log: () => {} });
  try {
    const state = await rt.read();
    return channels.map((c) => state.channels[c]?.members[0]?.session_id);
  } finally {
    await rt.close();
  }
}

describe('each session runs as its own member', () => {
  it("Claude Code: the pinned member by default, the session's OPENCOMMS_MEMBER_ID when set", async () => {
    const sb = sandbox('oc-member-env-claude');
    const tool = 'mcp__opencomms__opencomms_create';
    const fake = defer(
      await startFakeAnthropic({
        '[conv-A]': [create(tool, 'ch-a'), 'SAY done'],
        '[conv-B]': [create(tool, 'ch-b'), 'SAY done'],
      }),
      (f) => f.close(),
    );
    const env = configureClaude(sb, fake);
    trustClaudeProject(sb, env, ['opencomms']);
    const [first, second] = [pin(), pin()];
    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install-member', '--id', first);
    const recipe = await opencomms(sb, 'install-member', '--id', second);
    expect(recipe).toContain(`OPENCOMMS_MEMBER_ID=${second} claude`);
    const args = (prompt: string) => claudeArgs(prompt, { maxTurns: 3, persist: true });
    const a = await run(bin('claude'), args('[conv-A] create'), {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(a.code, describeRun(a)).toBe(0);
    const b = await run(bin('claude'), args('[conv-B] create'), {
      cwd: sb.proj,
      env: { ...env, OPENCOMMS_MEMBER_ID: second },
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(b.code, describeRun(b)).toBe(0);
    expect(await creators(sb.proj, ['ch-a', 'ch-b'])).toEqual([first, second]);
  }, 150_000);

  it("Codex: the pinned member by default, the session's OPENCOMMS_MEMBER_ID when set", async () => {
    const sb = sandbox('oc-member-env-codex');
    const tool = 'mcp__opencomms__opencomms_create';
    const fake = defer(
      await startFakeResponses({
        '[conv-A]': [create(tool, 'ch-a'), 'SAY done'],
        '[conv-B]': [create(tool, 'ch-b'), 'SAY done'],
      }),
      (f) => f.close(),
    );
    const env = configureCodex(sb, fake);
    trustCodexProject(sb, env);
    const [first, second] = [pin(), pin()];
    await opencomms(sb, 'install', 'codex');
    await opencomms(sb, 'install-member', '--host', 'codex', '--id', first);
    await opencomms(sb, 'install-member', '--host', 'codex', '--id', second);
    // The user's approval of the server's tools (Codex asks before an MCP tool runs).
    const config = join(sb.proj, '.codex', 'config.toml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace(
        '[mcp_servers.opencomms]\n',
        '[mcp_servers.opencomms]\ndefault_tools_approval_mode = "approve"\n',
      ),
    );
    const trust = ['--dangerously-bypass-hook-trust'];
    const a = await run(bin('codex'), codexArgs('[conv-A] create', trust), {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(a.code, describeRun(a)).toBe(0);
    const b = await run(bin('codex'), codexArgs('[conv-B] create', trust), {
      cwd: sb.proj,
      env: { ...env, OPENCOMMS_MEMBER_ID: second },
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(b.code, describeRun(b)).toBe(0);
    expect(await creators(sb.proj, ['ch-a', 'ch-b'])).toEqual([first, second]);
  }, 150_000);
});
