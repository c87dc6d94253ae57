// What Codex 0.171.0 does with the installed OpenComms tools under each approval policy
// (docs/hosts.md, "Codex: tool approvals"), on the real binary, offline. The model calls
// `opencomms_status`; the tool result the fake model server receives next says whether it ran.
// - `codex exec` (what spawn_push runs) asks no one: an OpenComms tool call is refused ("MCP tool call
//   requires approval, but approval policy is never") unless the tool is approved in the config, or
//   the sandbox is danger-full-access; `-c approval_policy="on-request"` does not change that.
// - The app-server (the TUI runs its turns on it) asks before each call under on-request and
//   on-failure; "Allow and don't ask me again" writes `[mcp_servers.opencomms.tools.<tool>]
//   approval_mode = "approve"` at the end of the project's `.codex/config.toml`. Under never it
//   refuses without asking.
// - `opencomms install codex` keeps that entry byte for byte, also when it repairs its own entry,
//   and Codex still reads the repaired file (the tools table then stands before the server's).
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { opencomms } from './claude-harness.ts';
import {
  bin,
  codexArgs,
  configureCodex,
  describeRun,
  namespaced,
  run,
  trustCodexProject,
  type Sandbox,
} from './env.ts';
import { startFakeResponses, type FakeServer } from './fake/index.ts';

const { defer, sandbox } = useCleanups();
const REFUSED = 'MCP tool call requires approval, but approval policy is never';
/** What an OpenComms answer looks like (the pinned member is on no channel yet). */
const RAN = /"reason":"identity_not_member"/;
const STATUS = 'CALL mcp__opencomms__opencomms_status {}';
const APPROVED_STATUS = '\n[mcp_servers.opencomms.tools.opencomms_status]\napproval_mode = "approve"\n';

/** A trusted project with OpenComms installed for Codex and a pinned member; the user config
 *  (configureCodex) has `approval_policy = "never"` and a read-only sandbox. */
async function installed(sb: Sandbox, fake: FakeServer) {
  const env = configureCodex(sb, fake);
  trustCodexProject(sb, env);
  await opencomms(sb, 'install', 'codex');
  await opencomms(sb, 'install-member', '--host', 'codex', '--id', `sess_${'c'.repeat(24)}`);
  return { env, config: join(sb.proj, '.codex', 'config.toml') };
}

/** The tool result of the conversation `tag` as the model received it. */
const toolResult = (fake: FakeServer, tag: string) =>
  fake.requests
    .filter((q) => q.isModelCall && q.userTexts.join(' ').includes(tag))
    .at(-1)
    ?.toolResults.at(-1)?.text ?? '(no tool result)';

describe('codex exec (spawn_push) and the OpenComms tools', () => {
  it('refused unless approved in the config or run with full access; on-request changes nothing', async () => {
    const sb = sandbox('codex-approvals-exec');
    const tags = ['plain', 'on-request', 'full-access', 'per-tool', 'server-wide'];
    const fake = defer(
      await startFakeResponses(Object.fromEntries(tags.map((t) => [`[${t}]`, [STATUS, 'SAY done']]))),
      (f) => f.close(),
    );
    const { env, config } = await installed(sb, fake);
    const base = readFileSync(config, 'utf8');
    const exec = async (tag: string, extra: string[] = []) => {
      const r = await run(bin('codex'), codexArgs(`[${tag}] status`, extra), {
        cwd: sb.proj,
        env,
        timeoutMs: 60_000,
        forward: [fake.port],
      });
      expect(r.code, describeRun(r)).toBe(0);
      return toolResult(fake, `[${tag}]`);
    };
    expect(await exec('plain')).toContain(REFUSED);
    expect(await exec('on-request', ['-c', 'approval_policy="on-request"'])).toContain(REFUSED);
    expect(await exec('full-access', ['-s', 'danger-full-access'])).toMatch(RAN);
    writeFileSync(config, base + APPROVED_STATUS);
    expect(await exec('per-tool')).toMatch(RAN);
    writeFileSync(
      config,
      base.replace('[mcp_servers.opencomms]\n', '[mcp_servers.opencomms]\ndefault_tools_approval_mode = "approve"\n'),
    );
    expect(await exec('server-wide')).toMatch(RAN);
  }, 180_000);
});

/** `codex app-server` over stdio (JSON-RPC, one message a line): what the TUI runs its turns on.
 *  Approval requests are answered with `answer`. */
async function appServer(sb: Sandbox, env: Record<string, string>, fake: FakeServer, answer: 'always' | 'once') {
  const ns = await namespaced(bin('codex'), ['app-server'], { forward: [fake.port] });
  const child: ChildProcess = spawn(ns.argv[0]!, ns.argv.slice(1), {
    cwd: sb.proj,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  defer(child, (c) => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // gone
    }
    ns.close();
  });
  const asked: any[] = [];
  const pending = new Map<number, (m: any) => void>();
  let done: (() => void) | null = null;
  let id = 0;
  const send = (m: unknown) => child.stdin!.write(`${JSON.stringify(m)}\n`);
  const request = (method: string, params: unknown) =>
    new Promise<any>((resolve) => {
      pending.set(++id, resolve);
      send({ id, method, params });
    });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const m = JSON.parse(line);
    if (m.id !== undefined && m.method === undefined) {
      pending.get(m.id)?.(m);
      pending.delete(m.id);
    } else if (m.id !== undefined && m.method === 'mcpServer/elicitation/request') {
      asked.push(m.params);
      send({
        id: m.id,
        result: { action: 'accept', content: {}, _meta: answer === 'always' ? { persist: 'always' } : null },
      });
    } else if (m.id !== undefined) send({ id: m.id, error: { code: -32601, message: `not answered: ${m.method}` } });
    else if (m.method === 'turn/completed') done?.();
  });
  await request('initialize', { clientInfo: { name: 'opencomms-test', version: '0.0.0' } });
  send({ method: 'initialized' });
  return {
    asked,
    /** One turn of a new thread under `policy` (the config's when undefined). */
    async turn(prompt: string, policy?: string) {
      const t = await request('thread/start', policy ? { cwd: sb.proj, approvalPolicy: policy } : { cwd: sb.proj });
      expect(t.error, JSON.stringify(t.error)).toBeUndefined();
      const finished = new Promise<void>((r) => (done = r));
      await request('turn/start', { threadId: t.result.thread.id, input: [{ type: 'text', text: prompt }] });
      await finished;
    },
  };
}

describe('the app-server (the TUI) and the OpenComms tools', () => {
  it('never: refused without asking; on-request and on-failure: asked; "always" writes the approval the installer keeps', async () => {
    const sb = sandbox('codex-approvals-app');
    const tags = ['never', 'on-request', 'on-failure', 'approved', 'repaired'];
    const fake = defer(
      await startFakeResponses(Object.fromEntries(tags.map((t) => [`[${t}]`, [STATUS, 'SAY done']]))),
      (f) => f.close(),
    );
    const { env, config } = await installed(sb, fake);
    const base = readFileSync(config, 'utf8');

    const once = await appServer(sb, env, fake, 'once');
    await once.turn('[never] status', 'never');
    expect(toolResult(fake, '[never]')).toContain(REFUSED);
    expect(once.asked).toEqual([]);
    // on-failure as the config's policy (the app-server's own parameter knows no such value).
    const user = join(env.CODEX_HOME!, 'config.toml');
    writeFileSync(
      user,
      readFileSync(user, 'utf8').replace('approval_policy = "never"', 'approval_policy = "on-failure"'),
    );
    const onFailure = await appServer(sb, env, fake, 'once');
    await onFailure.turn('[on-failure] status');
    expect(onFailure.asked.map((a) => a._meta.tool_name)).toEqual(['opencomms_status']);
    expect(toolResult(fake, '[on-failure]')).toMatch(RAN);
    expect(readFileSync(config, 'utf8')).toBe(base);

    const always = await appServer(sb, env, fake, 'always');
    await always.turn('[on-request] status', 'on-request');
    expect(always.asked).toHaveLength(1);
    expect(always.asked[0]).toMatchObject({
      serverName: 'opencomms',
      message: 'Allow the opencomms MCP server to run tool "opencomms_status"?',
      _meta: { persist: ['session', 'always'], tool_name: 'opencomms_status' },
    });
    expect(toolResult(fake, '[on-request]')).toMatch(RAN);
    const approved = readFileSync(config, 'utf8');
    expect(approved).toBe(base + APPROVED_STATUS);

    // A second install changes no byte; the approval lets `codex exec` (policy never) run the tool.
    await opencomms(sb, 'install', 'codex');
    expect(readFileSync(config, 'utf8')).toBe(approved);
    const exec = (tag: string) =>
      run(bin('codex'), codexArgs(`[${tag}] status`), { cwd: sb.proj, env, timeoutMs: 60_000, forward: [fake.port] });
    expect((await exec('approved')).code).toBe(0);
    expect(toolResult(fake, '[approved]')).toMatch(RAN);

    // An entry of ours from another checkout is repaired; the approval keeps its bytes and still works.
    const moved = approved.replace('".opencomms/opencomms-mcp.mjs"', '"/old/checkout/.opencomms/opencomms-mcp.mjs"');
    writeFileSync(config, moved);
    expect(await opencomms(sb, 'install', 'codex')).toMatch(
      /Repaired: \.codex\/config\.toml \[mcp_servers\.opencomms\]/,
    );
    const repaired = readFileSync(config, 'utf8');
    expect(repaired).toContain(APPROVED_STATUS.trimStart());
    expect(repaired).not.toContain('/old/checkout');
    expect((await exec('repaired')).code).toBe(0);
    expect(toolResult(fake, '[repaired]')).toMatch(RAN);
  }, 240_000);
});
