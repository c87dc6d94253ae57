// `opencomms install codex` / `uninstall codex` (FEATURES.md §8.1, §9; INS-1..4): a TOML library
// parses and writes `.codex/config.toml` (absolute paths, `cwd = "."`), the hook runner goes into
// `.codex/hooks.json`, malformed → zero writes, uninstall cuts exactly what install added.
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { codexHookGroups, planCodexInstall } from '../../../adapters/codex/install.ts';
import { shellQuote } from '../../../adapters/codex/shell.ts';
import { install, uninstall } from '../../../src/cli/hosts.ts';
import { useProject } from '../../helpers/project.ts';
import { MCP_NODE_FLAGS } from '../../../adapters/install/member-env.ts';

const p = useProject();
const quiet = { detect: async () => 'codex-cli 0.171.0', warn: () => {} };

const USER_TOML = `# my Codex project settings
model = "o4-mini"

[mcp_servers.github]
command = "gh-mcp"  # keep this comment
args = ["--stdio"]

[profiles.fast]
model = "gpt-5-mini"
`;

describe('install codex', () => {
  it('INS-3: appends [mcp_servers.opencomms] with project-relative paths, cwd ".", the session id passed through and the pin placeholder', async () => {
    const r = await install('codex', p.dir, quiet);
    expect(r.code, r.result.message).toBe(0);
    expect(r.result.message).toMatch(/trusted project/);
    const text = await p.read('.codex/config.toml');
    expect((parse(text) as any).mcp_servers.opencomms).toEqual({
      command: 'node',
      args: [...MCP_NODE_FLAGS, '.opencomms/opencomms-mcp.mjs', '.', '--host', 'codex'],
      cwd: '.',
      required: true,
      env_vars: ['OPENCOMMS_MEMBER_ID'],
      env: { OPENCOMMS_PINNED_MEMBER_ID: '<set by: opencomms install-member>' },
    });
    expect(p.dir).toContain(' ');
    const hooks = JSON.parse(await p.read('.codex/hooks.json')).hooks;
    expect(Object.keys(hooks)).toEqual(['SessionStart', 'UserPromptSubmit', 'Stop']);
    expect(hooks.Stop[0].hooks[0].command).toBe('node .opencomms/claude-code-hooks.mjs auto . --host codex');
    expect(text + (await p.read('.codex/hooks.json'))).not.toContain(p.dir);
  });

  it('INS-3: no checkout path in the config: a Windows project path never reaches the TOML or a hook command', () => {
    const proj = 'C:\\Users\\Ada Lovelace\\my "proj"';
    const plan = planCodexInstall(
      proj,
      new Map(),
      { 'claude-code-hooks.mjs': 'r', 'claude-code-hooks-full.mjs': 'f', 'opencomms-mcp.mjs': 's' },
      null,
    );
    if ('ok' in plan) throw new Error(plan.message);
    const written = plan.changes
      .filter((c) => c.path.includes('.codex'))
      .map((c) => c.content)
      .join('\n');
    expect(written).not.toContain('Lovelace');
    expect(shellQuote(proj, 'win32')).toBe('"C:\\Users\\Ada Lovelace\\my ""proj"""');
    expect(codexHookGroups('win32').Stop.hooks[0]!.command).toBe(
      'node .opencomms/claude-code-hooks.mjs auto . --host codex',
    );
  });

  it('the server is required, so Codex waits for it instead of starting the first turn without its tools; a reinstall adds it to an older entry of ours', async () => {
    const older = `[mcp_servers.opencomms]\ncommand = "node"\nargs = [ ".opencomms/opencomms-mcp.mjs", ".", "--host", "codex" ]\ncwd = "."\nenv_vars = [ "OPENCOMMS_MEMBER_ID" ]\n\n[mcp_servers.opencomms.env]\nOPENCOMMS_PINNED_MEMBER_ID = "sess_kept"\n`;
    await p.write('.codex/config.toml', older);
    const r = await install('codex', p.dir, quiet);
    expect(r.code, r.result.message).toBe(0);
    const server = (parse(await p.read('.codex/config.toml')) as any).mcp_servers.opencomms;
    expect(server.required).toBe(true);
    expect(server.env.OPENCOMMS_PINNED_MEMBER_ID).toBe('sess_kept');
  });

  it("writes no OPENCOMMS_MEMBER_ROLE (nothing reads it): an older install's placeholder goes with a repair, a value the user gave it stays", async () => {
    await install('codex', p.dir, quiet);
    const installed = await p.read('.codex/config.toml');
    expect(installed).not.toContain('OPENCOMMS_MEMBER_ROLE');
    const pinLine = 'OPENCOMMS_PINNED_MEMBER_ID = "<set by: opencomms install-member>"';
    expect(installed).toContain(pinLine);
    const withRole = (value: string) => installed.replace(pinLine, `${pinLine}\nOPENCOMMS_MEMBER_ROLE = "${value}"`);
    await p.write('.codex/config.toml', withRole('<role label>'));
    const r = await install('codex', p.dir, quiet);
    expect(r.result.data?.repaired).toEqual(['.codex/config.toml [mcp_servers.opencomms]']);
    expect(await p.read('.codex/config.toml')).toBe(installed);
    await p.write('.codex/config.toml', withRole('Builder'));
    const again = await install('codex', p.dir, quiet);
    expect(again.result.data).toMatchObject({ repaired: [] });
    expect((parse(await p.read('.codex/config.toml')) as any).mcp_servers.opencomms.env.OPENCOMMS_MEMBER_ROLE).toBe(
      'Builder',
    );
  });

  it('an existing [mcp_servers.opencomms] is left as the user set it', async () => {
    const own = '[mcp_servers.opencomms]\ncommand = "my-wrapper"\n';
    await p.write('.codex/config.toml', own);
    await install('codex', p.dir, quiet);
    expect(await p.read('.codex/config.toml')).toBe(own);
  });

  it('INS-2: malformed TOML, mcp_servers of another type, an inline mcp_servers table, or a malformed hooks.json: zero writes', async () => {
    const { rm } = await import('node:fs/promises');
    for (const [file, text] of [
      ['.codex/config.toml', 'model = "x"\n[mcp_servers\n'],
      ['.codex/config.toml', 'mcp_servers = 3\n'],
      ['.codex/config.toml', 'mcp_servers = { github = { command = "gh" } }\n'],
      ['.codex/hooks.json', '{ "hooks": [] }'],
    ] as const) {
      await rm(p.dir, { recursive: true, force: true });
      await p.write(file, text);
      const before = await p.snapshot();
      const r = await install('codex', p.dir, quiet);
      expect(r, text).toMatchObject({ code: 1, result: { data: { reason: 'config_malformed' } } });
      expect(await p.snapshot()).toEqual(before);
    }
  });
});

describe("the user's tool approvals in [mcp_servers.opencomms]", () => {
  // What Codex 0.171.0 writes when the user answers "Allow and don't ask me again" for a tool of a
  // server the project's config defines: `[mcp_servers.<server>.tools.<tool>] approval_mode =
  // "approve"` after a blank line at the end of that file (test/real/codex-approvals.test.ts); and
  // the server-wide key a user writes by hand.
  const TOOL_APPROVALS =
    '\n[mcp_servers.opencomms.tools.opencomms_send]\napproval_mode = "approve"\n\n[mcp_servers.opencomms.tools.opencomms_pull]\napproval_mode = "approve"  # asked once\n';
  const SERVER_WIDE = 'default_tools_approval_mode = "approve"\n';
  const withApprovals = (text: string) =>
    text.replace('[mcp_servers.opencomms]\n', `[mcp_servers.opencomms]\n${SERVER_WIDE}`) + TOOL_APPROVALS;

  it('a second install and doctor --fix keep them byte for byte', async () => {
    await p.write('.codex/config.toml', USER_TOML);
    await install('codex', p.dir, quiet);
    await p.write('.codex/config.toml', withApprovals(await p.read('.codex/config.toml')));
    const approved = await p.snapshot();
    const r = await install('codex', p.dir, quiet);
    expect(r.result.data).toMatchObject({ changed: [], repaired: [] });
    expect(await p.snapshot()).toEqual(approved);
    const { cli } = await import('../../cli/fixtures.ts');
    await cli('doctor', '--fix', '--project', p.dir);
    expect(await p.read('.codex/config.toml')).toBe(approved['.codex/config.toml']);
  });

  it('a repair of our own keys keeps them byte for byte, and the repaired entry is stable', async () => {
    // An older entry of ours (no `required`), with the user's approvals in it.
    const older = `${USER_TOML}\n[mcp_servers.opencomms]\n${SERVER_WIDE}command = "node"\nargs = [ ".opencomms/opencomms-mcp.mjs", ".", "--host", "codex" ]\ncwd = "."\nenv_vars = [ "OPENCOMMS_MEMBER_ID" ]\n\n[mcp_servers.opencomms.env]\nOPENCOMMS_PINNED_MEMBER_ID = "sess_kept"\n${TOOL_APPROVALS}`;
    await p.write('.codex/config.toml', older);
    const r = await install('codex', p.dir, quiet);
    expect(r.result.data?.repaired).toEqual(['.codex/config.toml [mcp_servers.opencomms]']);
    const text = await p.read('.codex/config.toml');
    expect(text.startsWith(USER_TOML)).toBe(true);
    expect(text).toContain(TOOL_APPROVALS.trimEnd());
    expect(text).toContain(SERVER_WIDE);
    const server = (parse(text) as any).mcp_servers.opencomms;
    expect(server).toMatchObject({
      required: true,
      default_tools_approval_mode: 'approve',
      tools: { opencomms_send: { approval_mode: 'approve' }, opencomms_pull: { approval_mode: 'approve' } },
      env: { OPENCOMMS_PINNED_MEMBER_ID: 'sess_kept' },
    });
    const again = await install('codex', p.dir, quiet);
    expect(again.result.data).toMatchObject({ changed: [], repaired: [] });
    // Uninstall takes the server's approvals with the server (alone they would name a server with
    // no command), and gives the user's file back byte for byte.
    expect((await uninstall('codex', p.dir)).code).toBe(0);
    expect(await p.read('.codex/config.toml')).toBe(USER_TOML);
  });
});

describe('INS-4 uninstall codex', () => {
  it('restores config.toml and hooks.json byte for byte; state and pins stay', async () => {
    await p.write('.codex/config.toml', USER_TOML);
    await p.write(
      '.codex/hooks.json',
      '{\n  "hooks": {\n    "Stop": [{ "hooks": [{ "type": "command", "command": "./mine.sh" }] }]\n  }\n}\n',
    );
    await p.write('.opencomms/state.json', '{}');
    await p.write('.opencomms/pins/sess_a.json', '{}');
    const before = await p.snapshot();
    await install('codex', p.dir, quiet);
    expect((await uninstall('codex', p.dir)).code).toBe(0);
    const after = await p.snapshot();
    delete after['.opencomms/.gitignore'];
    expect(after).toEqual(before);
  });

  it('cuts every [mcp_servers.opencomms*] table of ours wherever it stands, and nothing else', async () => {
    const text =
      '[mcp_servers.opencomms]\ncommand = "node"\nargs = [".opencomms/opencomms-mcp.mjs"]\n\n[mcp_servers.opencomms.env]\nA = "b"\n\n[other]\nk = 1\n';
    await p.write('.codex/config.toml', text);
    await uninstall('codex', p.dir);
    expect(await p.read('.codex/config.toml')).toBe('[other]\nk = 1\n');
  });
});
