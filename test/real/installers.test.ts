// The installers against real clients' config files (FEATURES.md §8.1, §9): a project whose
// `.mcp.json`, `.claude/settings.json` and `.codex/config.toml` already configure the user's own MCP
// server and hook. After `opencomms install claude-code` and `install codex` the real Claude Code
// and Codex still load the user's server next to ours, and Codex's first turn has our tools; a
// second install changes no byte; the uninstalls give back the original files byte for byte.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import {
  TOY_SERVER,
  bin,
  claudeArgs,
  codexArgs,
  configureClaude,
  configureCodex,
  describeRun,
  jsonLines,
  run,
  trustClaudeProject,
} from './env.ts';
import { startFakeAnthropic, startFakeResponses } from './fake/index.ts';
import { opencomms } from './claude-harness.ts';

const { defer, sandbox } = useCleanups();

const files = (proj: string, names: string[]) =>
  Object.fromEntries(names.map((n) => [n, readFileSync(join(proj, n), 'utf8')]));

describe("installers on the real clients' own config files", () => {
  it("keep the user's server and hook working in Claude Code and Codex; idempotent; uninstall restores every byte", async () => {
    const sb = sandbox('oc-installers');
    const claudeFake = defer(await startFakeAnthropic(['SAY hi']), (f) => f.close());
    const codexFake = defer(await startFakeResponses(['SAY hi', 'SAY hi']), (f) => f.close());
    const claudeEnv = configureClaude(sb, claudeFake);
    trustClaudeProject(sb, claudeEnv, ['toy', 'opencomms']);
    const codexEnv = configureCodex(sb, codexFake);
    writeFileSync(
      join(codexEnv.CODEX_HOME!, 'config.toml'),
      `${readFileSync(join(codexEnv.CODEX_HOME!, 'config.toml'), 'utf8')}\n[projects.${JSON.stringify(sb.proj)}]\ntrust_level = "trusted"\n`,
    );
    const hookLog = join(sb.root, 'user-hook.log');
    const userHook = `echo ran >> ${JSON.stringify(hookLog)}`;
    // The user's own project configuration, written as a person would.
    writeFileSync(
      join(sb.proj, '.mcp.json'),
      `{\n  "mcpServers": {\n    "toy": { "type": "stdio", "command": ${JSON.stringify(process.execPath)}, "args": [${JSON.stringify(TOY_SERVER)}] }\n  }\n}\n`,
    );
    mkdirSync(join(sb.proj, '.claude'), { recursive: true });
    writeFileSync(
      join(sb.proj, '.claude', 'settings.json'),
      `{\n  "hooks": {\n    "UserPromptSubmit": [\n      { "hooks": [{ "type": "command", "command": ${JSON.stringify(userHook)} }] }\n    ]\n  }\n}\n`,
    );
    mkdirSync(join(sb.proj, '.codex'), { recursive: true });
    writeFileSync(
      join(sb.proj, '.codex', 'config.toml'),
      `# project settings\n[mcp_servers.toy]\ncommand = ${JSON.stringify(process.execPath)}\nargs = [${JSON.stringify(TOY_SERVER)}]\ndefault_tools_approval_mode = "approve"\n`,
    );
    const names = ['.mcp.json', '.claude/settings.json', '.codex/config.toml'];
    const original = files(sb.proj, names);

    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install', 'codex');
    await opencomms(sb, 'install-member', '--id', 'sess_claude_member');
    await opencomms(sb, 'install-member', '--host', 'codex', '--id', 'sess_codex_member');
    const installed = files(sb.proj, [...names, '.codex/hooks.json', '.opencomms/claude-code-hooks.mjs']);
    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install', 'codex');
    expect(files(sb.proj, Object.keys(installed))).toEqual(installed);

    // Claude Code: both servers connect, the user's hook still runs next to ours.
    const c = await run(bin('claude'), claudeArgs('hello', { maxTurns: 2, persist: true }), {
      cwd: sb.proj,
      env: claudeEnv,
      timeoutMs: 60_000,
      forward: [claudeFake.port],
    });
    expect(c.code, describeRun(c)).toBe(0);
    const servers = jsonLines(c.stdout).find((l) => l.type === 'system' && l.subtype === 'init')?.mcp_servers ?? [];
    expect(servers.map((s: any) => [s.name, s.status]).sort()).toEqual([
      ['opencomms', 'connected'],
      ['toy', 'connected'],
    ]);
    expect(readFileSync(hookLog, 'utf8')).toBe('ran\n');
    // Codex, with its defaults: our server is required, so the first (and, in `codex exec`, only)
    // turn waits for its tools however long the server takes to start.
    const x = await run(bin('codex'), codexArgs('hello'), {
      cwd: sb.proj,
      env: codexEnv,
      timeoutMs: 60_000,
      forward: [codexFake.port],
    });
    expect(x.code, describeRun(x)).toBe(0);
    expect(codexFake.turns()[0]!.tools).toContain('mcp__opencomms__opencomms_send');
    // The user's server is optional (Codex leaves it out of a turn while it is still starting after
    // `mcp_optional_startup_grace_ms`); with that grace off, Codex waits for it and offers both.
    const y = await run(bin('codex'), codexArgs('hello', ['-c', 'mcp_optional_startup_grace_ms=0']), {
      cwd: sb.proj,
      env: codexEnv,
      timeoutMs: 60_000,
      forward: [codexFake.port],
    });
    expect(y.code, describeRun(y)).toBe(0);
    expect(codexFake.turns()[1]!.tools).toEqual(
      expect.arrayContaining(['mcp__toy__echo', 'mcp__opencomms__opencomms_send']),
    );

    await opencomms(sb, 'uninstall', 'claude-code');
    await opencomms(sb, 'uninstall', 'codex');
    expect(files(sb.proj, names)).toEqual(original);
  }, 150_000);
});
