// Smoke tests: each pinned real client talks to its fake model offline, inside a loopback-only
// network namespace with a fresh HOME. A client that is missing or cannot run fails its test
// with the reason (bin() throws); nothing is skipped.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import {
  REAL_DIR,
  TOY_SERVER,
  VERSIONS,
  bin,
  claudeArgs,
  codexArgs,
  configureClaude,
  configureCodex,
  configureOpenCode,
  describeRun,
  jsonLines,
  run,
  start,
  toyServer,
  waitHttp,
} from './env.ts';
import { startFakeAnthropic, startFakeOpenAIChat, startFakeResponses } from './fake/index.ts';
import type { FakeServer } from './fake/index.ts';

const { defer, sandbox } = useCleanups();
const fake = <T extends FakeServer>(f: T): T => defer(f, (x) => x.close());
const toyCalls = (log: string): any[] =>
  existsSync(log)
    ? readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
    : [];

describe('MCP Inspector CLI (v2 --cli) against the toy stdio server', () => {
  it('lists and calls the tool (JSON on stdout)', async () => {
    const sb = sandbox('inspector');
    const inspector = bin('mcp-inspector');
    const version = JSON.parse(
      readFileSync(join(REAL_DIR, 'node_modules/@modelcontextprotocol/inspector/package.json'), 'utf8'),
    ).version;
    expect(version).toBe(VERSIONS.inspector);
    const cli = ['--cli', '-q', '--format', 'json', process.execPath, TOY_SERVER];

    const list = await run(inspector, [...cli, '--method', 'tools/list'], {
      cwd: sb.proj,
      env: sb.env,
      timeoutMs: 20_000,
    });
    expect(list.code, describeRun(list)).toBe(0);
    const tools = JSON.parse(list.stdout).result.tools;
    expect(tools.map((t: any) => t.name)).toEqual(['echo']);
    expect(tools[0].inputSchema.required).toEqual(['text']);

    const log = join(sb.root, 'toy.log');
    const call = await run(
      inspector,
      [
        '--cli',
        '-q',
        '--format',
        'json',
        '-e',
        `TOY_LOG=${log}`,
        process.execPath,
        TOY_SERVER,
        '--method',
        'tools/call',
        '--tool-name',
        'echo',
        '--tool-args-json',
        '{"text":"from inspector"}',
      ],
      { cwd: sb.proj, env: sb.env, timeoutMs: 20_000 },
    );
    expect(call.code, describeRun(call)).toBe(0);
    expect(JSON.parse(call.stdout)).toEqual({
      result: { content: [{ type: 'text', text: 'toy echo: from inspector' }] },
    });
    expect(toyCalls(log).map((c) => c.text)).toEqual(['from inspector']);

    const missing = await run(inspector, [...cli, '--method', 'tools/call', '--tool-name', 'nope'], {
      cwd: sb.proj,
      env: sb.env,
      timeoutMs: 20_000,
    });
    expect(missing.code, describeRun(missing)).toBe(5); // tool_not_found
  });
});

describe('Claude Code (claude -p) against the fake Anthropic Messages API', () => {
  it('runs offline and prints the scripted reply', async () => {
    const sb = sandbox('claude');
    const claude = bin('claude');
    const v = await run(claude, ['--version'], { cwd: sb.proj, env: sb.env, timeoutMs: 15_000 });
    expect(v.stdout, describeRun(v)).toContain(VERSIONS.claude);

    const f = fake(await startFakeAnthropic(['SAY hello from the fake model']));
    const env = configureClaude(sb, f);
    const r = await run(claude, claudeArgs('hi'), { cwd: sb.proj, env, timeoutMs: 45_000, forward: [f.port] });
    expect(r.code, describeRun(r)).toBe(0);
    const result = jsonLines(r.stdout).find((l) => l.type === 'result');
    expect(result, describeRun(r)).toMatchObject({
      subtype: 'success',
      is_error: false,
      result: 'hello from the fake model',
    });

    const [turn] = f.turns();
    expect(turn.url).toBe('/v1/messages?beta=true');
    expect(turn.headers['x-api-key']).toBe('sk-ant-fake');
    expect(turn.body.stream).toBe(true);
    expect(turn.system).toMatch(/Claude/);
    expect(turn.userTexts.at(-1)).toBe('hi');
  });

  it('calls an MCP tool of <proj>/.mcp.json when the fake model asks, and the tool result reaches the fake', async () => {
    const sb = sandbox('claude-mcp');
    const log = join(sb.root, 'toy.log');
    const f = fake(await startFakeAnthropic(['CALL mcp__toy__echo {"text":"x"}', 'SAY done']));
    const env = configureClaude(sb, f, { toy: toyServer(log) });
    const r = await run(bin('claude'), claudeArgs('use the echo tool'), {
      cwd: sb.proj,
      env,
      timeoutMs: 45_000,
      forward: [f.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    const lines = jsonLines(r.stdout);
    const init = lines.find((l) => l.type === 'system' && l.subtype === 'init');
    expect(init?.mcp_servers, describeRun(r)).toEqual([expect.objectContaining({ name: 'toy', status: 'connected' })]);
    expect(lines.find((l) => l.type === 'result')).toMatchObject({
      subtype: 'success',
      result: 'done',
      permission_denials: [],
    });

    expect(toyCalls(log).map((c) => c.text)).toEqual(['x']);
    const [first, second] = f.turns();
    expect(first.tools).toContain('mcp__toy__echo'); // listed because ENABLE_TOOL_SEARCH=false
    expect(second.endsWithToolResult).toBe(true);
    expect(second.toolResults).toHaveLength(1);
    expect(second.toolResults[0].isError).toBe(false);
    expect(second.toolResults[0].text.trim()).toBe('toy echo: x');
  });
});

describe('Codex (codex exec) against the fake Responses API', () => {
  it('runs offline and prints the scripted reply', async () => {
    const sb = sandbox('codex');
    const codex = bin('codex');
    const v = await run(codex, ['--version'], { cwd: sb.proj, env: sb.env, timeoutMs: 15_000 });
    expect(v.stdout, describeRun(v)).toContain(VERSIONS.codex);

    const f = fake(await startFakeResponses(['SAY hello from the fake model']));
    const env = configureCodex(sb, f);
    const r = await run(codex, codexArgs('hi'), { cwd: sb.proj, env, timeoutMs: 45_000, forward: [f.port] });
    expect(r.code, describeRun(r)).toBe(0);
    const events = jsonLines(r.stdout);
    expect(
      events.find((e) => e.type === 'item.completed' && e.item.type === 'agent_message')?.item.text,
      describeRun(r),
    ).toBe('hello from the fake model');
    expect(events.at(-1)?.type).toBe('turn.completed');

    const [turn] = f.turns();
    expect(turn.url).toBe('/v1/responses');
    expect(turn.headers.authorization).toBe('Bearer sk-fake');
    expect(turn.system.length).toBeGreaterThan(0);
    expect(turn.userTexts.at(-1)).toBe('hi');
  });

  it('calls a namespaced MCP tool when the fake model asks, and the tool result reaches the fake', async () => {
    const sb = sandbox('codex-mcp');
    const log = join(sb.root, 'toy.log');
    const f = fake(await startFakeResponses(['CALL mcp__toy__echo {"text":"x"}', 'SAY done']));
    const env = configureCodex(sb, f, { toy: toyServer(log) });
    const r = await run(bin('codex'), codexArgs('use the echo tool'), {
      cwd: sb.proj,
      env,
      timeoutMs: 45_000,
      forward: [f.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    const events = jsonLines(r.stdout);
    const call = events.find((e) => e.type === 'item.completed' && e.item.type === 'mcp_tool_call')?.item;
    expect(call, describeRun(r)).toMatchObject({
      server: 'toy',
      tool: 'echo',
      status: 'completed',
      result: { content: [{ type: 'text', text: 'toy echo: x' }] },
    });

    expect(toyCalls(log).map((c) => c.text)).toEqual(['x']);
    const [first, second] = f.turns();
    expect(first.tools).toContain('mcp__toy__echo');
    expect(first.body.tools).toContainEqual(expect.objectContaining({ type: 'namespace', name: 'mcp__toy' }));
    expect(second.endsWithToolResult).toBe(true);
    expect(second.toolResults[0].text).toContain('toy echo: x');
  });
});

describe('OpenCode against the fake OpenAI-compatible Chat Completions API', () => {
  it('opencode run: offline, prints the scripted reply (title request answered aside)', async () => {
    const sb = sandbox('opencode');
    const opencode = bin('opencode');
    const v = await run(opencode, ['--version'], { cwd: sb.proj, env: sb.env, timeoutMs: 15_000 });
    expect(v.stdout.trim(), describeRun(v)).toBe(VERSIONS.opencode);

    const f = fake(await startFakeOpenAIChat(['SAY hello from the fake model']));
    const env = configureOpenCode(sb, f);
    const r = await run(opencode, ['run', '--format', 'json', 'hi'], {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [f.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    const texts = jsonLines(r.stdout)
      .filter((e) => e.type === 'text')
      .map((e) => e.part.text);
    expect(texts, describeRun(r)).toEqual(['hello from the fake model']);

    const [turn] = f.turns();
    expect(turn.url).toBe('/v1/chat/completions');
    expect(turn.body.model).toBe('fake-model');
    expect(turn.system).toMatch(/opencode/);
    expect(turn.userTexts.at(-1)).toBe('hi');
  });

  it('opencode run: calls an MCP tool (named <server>_<tool>), and the tool result reaches the fake', async () => {
    const sb = sandbox('opencode-mcp');
    const log = join(sb.root, 'toy.log');
    const f = fake(await startFakeOpenAIChat(['CALL toy_echo {"text":"x"}', 'SAY done']));
    const env = configureOpenCode(sb, f, { toy: toyServer(log) });
    const r = await run(bin('opencode'), ['run', '--format', 'json', 'use the echo tool'], {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [f.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    const tool = jsonLines(r.stdout).find((e) => e.type === 'tool_use')?.part;
    expect(tool, describeRun(r)).toMatchObject({
      tool: 'toy_echo',
      state: { status: 'completed', output: 'toy echo: x' },
    });
    expect(toyCalls(log).map((c) => c.text)).toEqual(['x']);
    const [first, second] = f.turns();
    expect(first.tools).toContain('toy_echo');
    expect(second.toolResults).toEqual([expect.objectContaining({ text: 'toy echo: x' })]);
  });

  it('opencode serve + a project plugin (offline plugin-dependency fix): HTTP prompt, plugin tool and system text reach the fake', async () => {
    const sb = sandbox('opencode-serve');
    // The plugin adds a system text (it keys the fake's conversation) and a tool `plugin_ping`.
    mkdirSync(join(sb.proj, '.opencode', 'plugin'), { recursive: true });
    writeFileSync(
      join(sb.proj, '.opencode', 'plugin', 'smoke.js'),
      [
        'import { tool } from "@opencode-ai/plugin";',
        'export const Smoke = async () => ({',
        '  tool: { plugin_ping: tool({ description: "ping", args: { n: tool.schema.number() }, async execute(a) { return `pong ${a.n} from plugin`; } }) },',
        '  "experimental.chat.system.transform": async (_input, output) => { output.system.push("SMOKE-PLUGIN-MARKER"); },',
        '});',
      ].join('\n'),
    );
    const f = fake(
      await startFakeOpenAIChat({
        'SMOKE-PLUGIN-MARKER': ['SAY hello over HTTP', 'CALL plugin_ping {"n":7}', 'SAY got it'],
      }),
    );
    const env = configureOpenCode(sb, f);
    const PORT = 4096; // inside the namespace; the test reaches it through the `expose` relay
    const serve = await start(bin('opencode'), ['serve', '--port', String(PORT), '--hostname', '127.0.0.1'], {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [f.port],
      expose: [PORT],
    });
    defer(serve, (x) => x.stop());
    const base = `http://127.0.0.1:${serve.ports.get(PORT)}`;
    await waitHttp(`${base}/global/health`, 20_000).catch((e) => {
      throw new Error(`${e.message}\n${serve.stderr()}`);
    });

    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
      expect(res.status, `${path}: ${res.status}`).toBe(200);
      return res.json() as Promise<any>;
    };
    const texts = (reply: any): string[] => reply.parts.filter((p: any) => p.type === 'text').map((p: any) => p.text);
    const session = await post('/session', { title: 'smoke' });
    expect(session.id).toMatch(/^ses_/);
    expect(
      texts(await post(`/session/${session.id}/message`, { parts: [{ type: 'text', text: 'hi over HTTP' }] })),
    ).toEqual(['hello over HTTP']);
    expect(
      texts(await post(`/session/${session.id}/message`, { parts: [{ type: 'text', text: 'ping please' }] })),
    ).toEqual(['got it']);

    const turns = f.turns();
    expect(turns.map((t) => t.conversation)).toEqual([
      'SMOKE-PLUGIN-MARKER',
      'SMOKE-PLUGIN-MARKER',
      'SMOKE-PLUGIN-MARKER',
    ]);
    expect(turns[0].userTexts).toEqual(['hi over HTTP']);
    expect(turns[1].tools).toContain('plugin_ping');
    expect(turns[2].toolResults.map((r) => r.text)).toEqual(['pong 7 from plugin']);
  });
});
