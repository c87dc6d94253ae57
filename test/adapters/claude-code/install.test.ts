// `opencomms install claude-code` / `uninstall claude-code` (FEATURES.md §8.1, §9; INS-1, INS-2,
// INS-4): idempotent, unrelated keys and comments kept, malformed → zero writes, never a partial
// install, uninstall restores what was there byte for byte.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { claudeHookGroups } from '../../../adapters/claude-code/install.ts';
import { applyChanges, type ApplyOps } from '../../../adapters/install/files.ts';
import { MEMBER_ID_PLACEHOLDER } from '../../../adapters/install/member-env.ts';
import { install, uninstall } from '../../../src/cli/hosts.ts';
import { useProject } from '../../helpers/project.ts';
import { MCP_NODE_FLAGS } from '../../../adapters/install/member-env.ts';

const p = useProject();
const quiet = { detect: async () => '2.1.332 (Claude Code)', warn: () => {} };
const RUNNER = '.opencomms/claude-code-hooks.mjs';

const USER_SETTINGS = `{
  // the user's own settings
  "model": "sonnet",
  "permissions": {
    "allow": ["Bash(npm test)"]
  },
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [{ "type": "command", "command": "./audit.sh" }] }
    ],
    "Stop": [
      { "hooks": [{ "type": "command", "command": "./notify.sh" }] }
    ]
  }
}
`;
const USER_MCP = `{
  "mcpServers": {
    "github": { "type": "stdio", "command": "gh-mcp", "args": [] }
  }
}
`;

describe('install claude-code', () => {
  it('writes both bundles, the four hooks (SessionStart and Stop also arm the waiter), .mcp.json and /opencomms', async () => {
    const r = await install('claude-code', p.dir, quiet);
    expect(r.code, r.result.message).toBe(0);
    const settings = JSON.parse(await p.read('.claude/settings.json'));
    expect(Object.keys(settings.hooks)).toEqual(['SessionStart', 'UserPromptSubmit', 'Stop', 'SessionEnd']);
    for (const ev of ['SessionStart', 'UserPromptSubmit', 'Stop', 'SessionEnd'])
      expect(settings.hooks[ev][0].hooks[0]).toEqual({
        type: 'command',
        command: 'node "${CLAUDE_PROJECT_DIR}/.opencomms/claude-code-hooks.mjs"',
        timeout: 15,
      });
    for (const ev of ['SessionStart', 'Stop'])
      expect(settings.hooks[ev][0].hooks[1]).toMatchObject({
        command:
          '{ node "${CLAUDE_PROJECT_DIR}/.opencomms/claude-code-hooks.mjs" wait --shell $$ <&3 3<&- & } 3<&0 | { IFS= read -r w && [ "$w" = wake ] && exit 2; exit 0; }',
        asyncRewake: true,
        timeout: 86400,
      });
    const mcp = JSON.parse(await p.read('.mcp.json'));
    expect(mcp.mcpServers.opencomms).toEqual({
      type: 'stdio',
      command: 'node',
      args: [...MCP_NODE_FLAGS, '.opencomms/opencomms-mcp.mjs', '.', '--host', 'claude-code'],
      env: {
        OPENCOMMS_MEMBER_ID: `\${OPENCOMMS_MEMBER_ID:-${MEMBER_ID_PLACEHOLDER}}`,
      },
    });
    const cmd = await p.read('.claude/commands/opencomms.md');
    expect(cmd).toContain('$ARGUMENTS');
    for (const t of ['status', 'send', 'inbox', 'history']) expect(cmd).toContain(`mcp__opencomms__opencomms_${t}`);
    expect((await p.read(RUNNER)).startsWith('// opencomms-hook-runner ')).toBe(true);
    expect((await p.read('.opencomms/opencomms-mcp.mjs')).startsWith('// opencomms-mcp-server ')).toBe(true);
    expect(await p.read('.opencomms/.gitignore')).toBe('*\n');
  });

  it('the bundles are self-contained: they load from the project with no node_modules anywhere above it', async () => {
    await install('claude-code', p.dir, quiet);
    const node = (args: string[], input = '') =>
      spawnSync(process.execPath, args, { cwd: p.dir, input, encoding: 'utf8', timeout: 20_000 });
    const full = node([
      '--input-type=module',
      '-e',
      `const m = await import(${JSON.stringify(p.at('.opencomms/claude-code-hooks-full.mjs'))}); process.stdout.write(Object.keys(m).sort().join())`,
    ]);
    expect(full.stdout, full.stderr).toBe('confirmWoken,handleHook,runWaiter');
    expect(node([p.at(RUNNER)], '{}').stdout).toBe('{}\n');
    const server = node([p.at('.opencomms/opencomms-mcp.mjs'), p.dir]);
    expect([server.status, server.stderr]).toEqual([0, expect.stringContaining('[opencomms-mcp] start: pin set NO')]);
    // The fast entry parses on every prompt: small, though it carries the PostgreSQL mailbox read
    // (a wire client with SCRAM); the hook bench holds its whole cost to 1.25x a bare Node start.
    expect((await p.read(RUNNER)).length).toBeLessThan(16 * 1024);
  });

  it('INS-1: a second run changes no byte; unrelated keys, hooks and comments are kept', async () => {
    await p.write('.claude/settings.json', USER_SETTINGS);
    await p.write('.mcp.json', USER_MCP);
    await install('claude-code', p.dir, quiet);
    const once = await p.snapshot();
    const settings = once['.claude/settings.json']!;
    expect(settings).toContain("// the user's own settings");
    expect(settings).toContain('"command": "./audit.sh"');
    expect(settings).toContain('"command": "./notify.sh"');
    const r = await install('claude-code', p.dir, quiet);
    expect(r.result.data).toMatchObject({ changed: [] });
    expect(await p.snapshot()).toEqual(once);
  });

  it("removes an older install's empty-when-unset password variables from its own entry, and keeps the user's", async () => {
    await install('claude-code', p.dir, quiet);
    const installed = await p.read('.mcp.json');
    const member = `"OPENCOMMS_MEMBER_ID": "\${OPENCOMMS_MEMBER_ID:-${MEMBER_ID_PLACEHOLDER}}"`;
    expect(installed).toContain(member);
    // What installs on a PostgreSQL project wrote: Claude Code expands `${VAR:-}` to "" when the
    // session has no such variable, and an empty PGPASSWORD hides the password file from `pg`.
    const older = (extra: string) =>
      installed.replace(
        member,
        `${member},\n        "PGPASSWORD": "\${PGPASSWORD:-}",\n        "PGPASSFILE": "\${PGPASSFILE:-}"${extra}`,
      );
    await p.write('.mcp.json', older(''));
    const r = await install('claude-code', p.dir, quiet);
    expect(r.result.data?.repaired).toEqual([
      ".mcp.json mcpServers.opencomms.env.PGPASSWORD (removed: the session's own reaches the server)",
      ".mcp.json mcpServers.opencomms.env.PGPASSFILE (removed: the session's own reaches the server)",
    ]);
    expect(await p.read('.mcp.json')).toBe(installed);
    // A value the user wrote there is theirs: kept, byte for byte.
    const own = older(',\n        "PGSSLMODE": "verify-full"').replace('"${PGPASSFILE:-}"', '"/home/me/team.pgpass"');
    await p.write('.mcp.json', own);
    await install('claude-code', p.dir, quiet);
    expect(await p.read('.mcp.json')).toBe(own.replace(',\n        "PGPASSWORD": "${PGPASSWORD:-}"', ''));
  });

  it("writes no OPENCOMMS_MEMBER_ROLE (nothing reads it), removes an older install's placeholder from its own entry, and keeps the user's value", async () => {
    await install('claude-code', p.dir, quiet);
    const installed = await p.read('.mcp.json');
    expect(installed).not.toContain('OPENCOMMS_MEMBER_ROLE');
    const member = `"OPENCOMMS_MEMBER_ID": "\${OPENCOMMS_MEMBER_ID:-${MEMBER_ID_PLACEHOLDER}}"`;
    const withRole = (value: string) =>
      installed.replace(member, `${member},\n        "OPENCOMMS_MEMBER_ROLE": "${value}"`);
    await p.write('.mcp.json', withRole('<role label>'));
    const r = await install('claude-code', p.dir, quiet);
    expect(r.result.data?.repaired).toEqual([
      '.mcp.json mcpServers.opencomms.env.OPENCOMMS_MEMBER_ROLE (removed: nothing reads it)',
    ]);
    expect(await p.read('.mcp.json')).toBe(installed);
    expect((await install('claude-code', p.dir, quiet)).result.data).toMatchObject({ changed: [], repaired: [] });
    await p.write('.mcp.json', withRole('Reviewer'));
    await install('claude-code', p.dir, quiet);
    expect(await p.read('.mcp.json')).toBe(withRole('Reviewer'));
  });

  it('replaces an older OpenComms hook group in place instead of adding a second', async () => {
    await p.write(
      '.claude/settings.json',
      JSON.stringify({
        hooks: { Stop: [{ hooks: [{ type: 'command', command: `node "x/${'claude-code-hooks.mjs'}"`, timeout: 5 }] }] },
      }),
    );
    await install('claude-code', p.dir, quiet);
    const stop = JSON.parse(await p.read('.claude/settings.json')).hooks.Stop;
    expect(stop).toEqual([claudeHookGroups().Stop]);
  });

  it('INS-2: a malformed settings.json or .mcp.json, or hooks of the wrong shape, means zero writes', async () => {
    for (const [file, text] of [
      ['.claude/settings.json', '{ "hooks": '],
      ['.claude/settings.json', '{ "hooks": [] }'],
      ['.claude/settings.json', '{ "hooks": { "Stop": {} } }'],
      ['.mcp.json', '[1, 2]'],
      ['.mcp.json', '{ "mcpServers": 3 }'],
    ] as const) {
      const { rm } = await import('node:fs/promises');
      await rm(p.dir, { recursive: true, force: true });
      await p.write(file, text);
      const before = await p.snapshot();
      const r = await install('claude-code', p.dir, quiet);
      expect(r, `${file}: ${text}`).toMatchObject({
        code: 1,
        result: { ok: false, data: { reason: 'config_malformed' } },
      });
      expect(r.result.message).toContain(file.split('/').pop());
      expect(await p.snapshot()).toEqual(before);
    }
  });

  it('INS-2: a write that fails after others succeeded restores every file written before it', async () => {
    await p.write('.mcp.json', USER_MCP);
    const before = new Map<string, string | null>([
      [p.at('.mcp.json'), USER_MCP],
      [p.at('a'), null],
      [p.at('b'), 'old b'],
    ]);
    let writes = 0;
    const { writeFile, rm } = await import('node:fs/promises');
    const ops: ApplyOps = {
      async write(path, text) {
        if (++writes === 3) throw new Error('disk full');
        await writeFile(path, text);
      },
      remove: (path) => rm(path, { force: true }),
    };
    await p.write('b', 'old b');
    await expect(
      applyChanges(
        [
          { path: p.at('a'), content: 'new a' },
          { path: p.at('b'), content: 'new b' },
          { path: p.at('.mcp.json'), content: '{}' },
        ],
        before,
        ops,
      ),
    ).rejects.toThrow('disk full');
    expect(existsSync(p.at('a'))).toBe(false);
    expect(await p.read('b')).toBe('old b');
    expect(await p.read('.mcp.json')).toBe(USER_MCP);
  });
});

describe('INS-4 uninstall claude-code', () => {
  it('restores pre-existing files byte for byte and removes the files it created; state, pins, archives stay', async () => {
    await p.write('.claude/settings.json', USER_SETTINGS);
    await p.write('.mcp.json', USER_MCP);
    await p.write('.opencomms/state.json', '{"schema_version":2}');
    await p.write('.opencomms/pins/sess_a.json', '{}');
    await p.write('.opencomms/archives/chn_x.json', '{}');
    const before = await p.snapshot();
    await install('claude-code', p.dir, quiet);
    const r = await uninstall('claude-code', p.dir);
    expect(r.code, r.result.message).toBe(0);
    const after = await p.snapshot();
    delete after['.opencomms/.gitignore']; // the store's own file, created with .opencomms/ when missing
    expect(after).toEqual(before);
  });

  it('from a project that had none of the files, leaves none of them', async () => {
    await install('claude-code', p.dir, quiet);
    await uninstall('claude-code', p.dir);
    expect(Object.keys(await p.snapshot())).toEqual(['.opencomms/.gitignore']);
  });

  it('keeps the MCP bundle and the hook runner while Codex still uses them', async () => {
    await install('claude-code', p.dir, quiet);
    await install('codex', p.dir, quiet);
    await uninstall('claude-code', p.dir);
    expect(existsSync(p.at('.opencomms/opencomms-mcp.mjs'))).toBe(true);
    expect(existsSync(p.at(RUNNER))).toBe(true);
    expect(existsSync(p.at('.mcp.json'))).toBe(false);
    await uninstall('codex', p.dir);
    expect(existsSync(p.at('.opencomms/opencomms-mcp.mjs'))).toBe(false);
    expect(existsSync(p.at(RUNNER))).toBe(false);
  });

  it('a malformed config refuses the uninstall with zero writes', async () => {
    await install('claude-code', p.dir, quiet);
    await p.write('.mcp.json', '{ broken');
    const before = await p.snapshot();
    expect(await uninstall('claude-code', p.dir)).toMatchObject({
      code: 1,
      result: { data: { reason: 'config_malformed' } },
    });
    expect(await p.snapshot()).toEqual(before);
  });
});
