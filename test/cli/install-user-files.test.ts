// The installers and the user's own config files (docs/installers.md): an install changes only its
// own spans (bytes, comments, shapes, mode, symlinks), a second install repairs its own entries and
// says so, uninstall removes only what an install recorded as its own and restores the rest byte
// for byte, doctor checks each host's whole install, and paths the hosts cannot run are refused.
import { spawnSync } from 'node:child_process';
import { cp, lstat, mkdir, readdir, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyChanges, durableOps } from '../../adapters/install/files.ts';
import { doctor } from '../../src/doctor/doctor.ts';
import { findProjectRoot } from '../../src/cli/context.ts';
import { install, installAll, installMember, uninstall, uninstallAll } from '../../src/cli/hosts.ts';
import { installOpenCode, uninstallOpenCode } from '../../adapters/opencode/install.ts';
import { MCP_NODE_FLAGS } from '../../adapters/install/member-env.ts';
import { useProject } from '../helpers/project.ts';
import { cli } from './fixtures.ts';

const p = useProject();
const quiet = { detect: async () => 'x', warn: () => {} };
const rowsOf = async (dir: string) => (await doctor(dir)).data!.rows;
const hostRow = async (dir: string, host: string) => (await rowsOf(dir)).filter((r) => r.check === host);
const CONFIGS = ['.mcp.json', '.claude/settings.json', '.codex/config.toml', '.codex/hooks.json'];

/** An entry of ours as an install before project-relative paths wrote it, for another checkout. */
const OLD_ROOT = '/srv/old checkout';
const oldMcp = (id: string) =>
  `${JSON.stringify({ mcpServers: { opencomms: { type: 'stdio', command: 'node', args: [`${OLD_ROOT}/.opencomms/opencomms-mcp.mjs`, OLD_ROOT, '--host', 'claude-code'], env: { OPENCOMMS_MEMBER_ID: id, OPENCOMMS_MEMBER_ROLE: 'Reviewer' } } } }, null, 2)}\n`;
const oldToml = (id: string) =>
  `[mcp_servers.opencomms]\ncommand = "node"\nargs = [ "${OLD_ROOT}/.opencomms/opencomms-mcp.mjs", "${OLD_ROOT}", "--host", "codex" ]\ncwd = "."\n\n[mcp_servers.opencomms.env]\nOPENCOMMS_MEMBER_ID = "${id}"\nOPENCOMMS_MEMBER_ROLE = "<role label>"\n`;

describe('a moved or copied project runs its own files', () => {
  it('the configs name no path of this checkout; a copy starts its own MCP server on its own project', async () => {
    await install('claude-code', p.dir, quiet);
    await install('codex', p.dir, quiet);
    await installMember(p.dir, { id: 'sess_copy_member' });
    for (const f of CONFIGS) expect(await p.read(f), f).not.toContain(p.dir);
    const copy = `${p.dir} copy`;
    await cp(p.dir, copy, { recursive: true });
    try {
      expect((await install('claude-code', copy, quiet)).result.data).toMatchObject({ changed: [], repaired: [] });
      const args = JSON.parse(await p.read('.mcp.json')).mcpServers.opencomms.args as string[];
      await rm(p.dir, { recursive: true }); // the original is gone: only the copy's files can answer
      const server = spawnSync('node', args, { cwd: copy, input: '', encoding: 'utf8', timeout: 20_000 });
      expect(server.stderr).toContain('[opencomms-mcp] start');
      expect(server.stderr).not.toMatch(/Cannot find module|Error/);
      expect((await hostRow(copy, 'claude-code')).map((r) => r.level)).toEqual(['OK']);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it('a reinstall repairs entries of ours written for another checkout, keeps their member ids and says what it repaired', async () => {
    await p.write('.mcp.json', oldMcp('sess_old_claude'));
    await p.write('.codex/config.toml', oldToml('sess_old_codex'));
    for (const host of ['claude-code', 'codex'])
      expect(
        (await hostRow(p.dir, host)).some((r) => r.level === 'FAIL' && r.detail.includes('outside this project')),
      ).toBe(true);
    const a = await install('claude-code', p.dir, quiet);
    expect(a.result.message).toContain('Repaired: .mcp.json mcpServers.opencomms.args');
    const server = JSON.parse(await p.read('.mcp.json')).mcpServers.opencomms;
    expect(server.args).toEqual([...MCP_NODE_FLAGS, '.opencomms/opencomms-mcp.mjs', '.', '--host', 'claude-code']);
    expect(server.env).toEqual({
      OPENCOMMS_MEMBER_ID: '${OPENCOMMS_MEMBER_ID:-sess_old_claude}',
      OPENCOMMS_MEMBER_ROLE: 'Reviewer',
    });
    const b = await install('codex', p.dir, quiet);
    expect(b.result.message).toContain('Repaired: .codex/config.toml [mcp_servers.opencomms]');
    const toml = await p.read('.codex/config.toml');
    expect(toml).not.toContain(OLD_ROOT);
    expect(toml).toContain('OPENCOMMS_PINNED_MEMBER_ID = "sess_old_codex"');
    expect((await rowsOf(p.dir)).filter((r) => r.detail.includes('outside this project'))).toEqual([]);
  });
});

describe('uninstall removes only what an install added', () => {
  it('a hand-written opencomms server survives install and uninstall, in .mcp.json and in config.toml', async () => {
    const mcp = '{\n  "mcpServers": {\n    "opencomms": { "command": "my-wrapper" }\n  }\n}\n';
    const toml = '[mcp_servers.opencomms]\ncommand = "my-wrapper"\n';
    await p.write('.mcp.json', mcp);
    await p.write('.codex/config.toml', toml);
    expect((await install('claude-code', p.dir, quiet)).result.message).toContain('did not write');
    expect((await install('codex', p.dir, quiet)).result.message).toContain('did not write');
    await uninstall('claude-code', p.dir);
    await uninstall('codex', p.dir);
    expect(await p.read('.mcp.json')).toBe(mcp);
    expect(await p.read('.codex/config.toml')).toBe(toml);
  });

  it('pre-existing {} and {"mcpServers": {}} files, an empty hooks.json, config.toml without a final newline and a CRLF config.toml come back byte for byte', async () => {
    for (const files of [
      {
        '.mcp.json': '{}',
        '.claude/settings.json': '{}\n',
        '.codex/hooks.json': '{}',
        '.codex/config.toml': 'model = "o4"',
      },
      {
        '.mcp.json': '{"mcpServers": {}}',
        '.claude/settings.json': '{"hooks": {"Stop": []}}',
        '.codex/hooks.json': '{}\n',
        '.codex/config.toml': 'model = "o4"\r\n[profiles.x]\r\nmodel = "y"\r\n',
      },
    ]) {
      await rm(p.dir, { recursive: true, force: true });
      for (const [f, t] of Object.entries(files)) await p.write(f, t);
      await install('claude-code', p.dir, quiet);
      await install('codex', p.dir, quiet);
      const crlf = await p.read('.codex/config.toml');
      if (files['.codex/config.toml'].includes('\r\n')) expect(crlf.replace(/\r\n/g, '')).not.toContain('\n');
      expect((await uninstall('claude-code', p.dir)).code).toBe(0);
      expect((await uninstall('codex', p.dir)).code).toBe(0);
      for (const [f, t] of Object.entries(files)) expect(await p.read(f), f).toBe(t);
    }
  });

  it('uninstall claude-code refuses, removing nothing, while .codex/config.toml is malformed (Codex may still use the bundle)', async () => {
    await install('claude-code', p.dir, quiet);
    await install('codex', p.dir, quiet);
    await p.write('.codex/config.toml', '[mcp_servers\n');
    const before = await p.snapshot();
    expect(await uninstall('claude-code', p.dir)).toMatchObject({
      code: 1,
      result: { data: { reason: 'config_malformed' } },
    });
    expect(await p.snapshot()).toEqual(before);
  });
});

describe("the user's file stays the user's", () => {
  it('symlinked configs stay symlinks: install edits the targets, uninstall restores them byte for byte', async () => {
    const dot = join(p.dir, 'dotfiles');
    await mkdir(dot);
    const originals: Record<string, string> = {
      '.mcp.json': '{\n  "mcpServers": {}\n}\n',
      '.claude/settings.json': '{\n  "model": "sonnet"\n}\n',
      '.codex/config.toml': 'model = "o4"\n',
    };
    for (const [f, t] of Object.entries(originals)) {
      const target = join(dot, f.replace(/\//g, '_'));
      await writeFile(target, t);
      await mkdir(join(p.dir, f, '..'), { recursive: true });
      await symlink(target, p.at(f));
    }
    await install('claude-code', p.dir, quiet);
    await install('codex', p.dir, quiet);
    for (const f of Object.keys(originals)) {
      expect((await lstat(p.at(f))).isSymbolicLink(), f).toBe(true);
      expect(await p.read(f)).toContain('opencomms');
    }
    await uninstall('claude-code', p.dir);
    await uninstall('codex', p.dir);
    for (const [f, t] of Object.entries(originals)) {
      expect((await lstat(p.at(f))).isSymbolicLink(), f).toBe(true);
      expect(await readlink(p.at(f))).toBe(join(dot, f.replace(/\//g, '_')));
      expect(await p.read(f)).toBe(t);
    }
  });

  it('a 0600 config stays 0600 through install and uninstall', async () => {
    const files = {
      '.mcp.json': '{\n  "mcpServers": { "x": { "command": "x", "env": { "API_KEY": "k" } } }\n}\n',
      '.claude/settings.json': '{}\n',
      '.codex/config.toml': 'model = "o4"\n',
    };
    for (const [f, t] of Object.entries(files)) {
      await p.write(f, t);
      await (await import('node:fs/promises')).chmod(p.at(f), 0o600);
    }
    await install('claude-code', p.dir, quiet);
    await install('codex', p.dir, quiet);
    for (const f of Object.keys(files)) expect(((await stat(p.at(f))).mode & 0o777).toString(8), f).toBe('600');
    await uninstall('claude-code', p.dir);
    await uninstall('codex', p.dir);
    for (const f of Object.keys(files)) expect(((await stat(p.at(f))).mode & 0o777).toString(8), f).toBe('600');
  });

  it('a reinstall keeps a hook the user added inside the group OpenComms wrote', async () => {
    await install('claude-code', p.dir, quiet);
    const settings = JSON.parse(await p.read('.claude/settings.json'));
    settings.hooks.Stop[0].hooks[0].timeout = 5; // an older form of ours: the reinstall repairs it
    settings.hooks.Stop[0].hooks.push({ type: 'command', command: './mine.sh' });
    await p.write('.claude/settings.json', JSON.stringify(settings, null, 2));
    const r = await install('claude-code', p.dir, quiet);
    expect(r.result.message).toContain('Repaired: .claude/settings.json hooks.Stop');
    const stop = JSON.parse(await p.read('.claude/settings.json')).hooks.Stop;
    expect(stop).toHaveLength(1);
    expect(stop[0].hooks.map((h: { command: string }) => h.command)).toEqual([
      './mine.sh',
      'node "${CLAUDE_PROJECT_DIR}/.opencomms/claude-code-hooks.mjs"',
      '{ node "${CLAUDE_PROJECT_DIR}/.opencomms/claude-code-hooks.mjs" wait --shell $$ <&3 3<&- & } 3<&0 | { IFS= read -r w && [ "$w" = wake ] && exit 2; exit 0; }',
    ]);
    expect(stop[0].hooks[1].timeout).toBe(15);
  });

  it('a comment inside an otherwise empty object stays, and uninstall gives the file back', async () => {
    const mcp = '{\n  // team note\n}\n';
    await p.write('.mcp.json', mcp);
    await install('claude-code', p.dir, quiet);
    expect(await p.read('.mcp.json')).toContain('// team note');
    await uninstall('claude-code', p.dir);
    expect(await p.read('.mcp.json')).toBe(mcp);
  });

  it('opencode: one element joins the plugin array (comments and a trailing comma stay); a plugin string comes back as it was', async () => {
    for (const config of ['{\n  "plugin": [\n    // ours\n    "a",\n  ]\n}\n', '{\n  "plugin": "single-plugin"\n}\n']) {
      await rm(p.dir, { recursive: true, force: true });
      await p.write('opencode.json', config);
      expect((await installOpenCode(p.dir)).ok).toBe(true);
      const installed = await p.read('opencode.json');
      if (config.includes('// ours'))
        expect(installed).toBe(
          '{\n  "plugin": [\n    // ours\n    "a",\n    ".opencode/plugins/opencomms.js",\n  ]\n}\n',
        );
      expect((await uninstallOpenCode(p.dir)).ok).toBe(true);
      expect(await p.read('opencode.json')).toBe(config);
    }
  });
});

describe("doctor checks each host's whole install", () => {
  it('a Codex-only install does not fail Claude Code; Codex hooks and the runner are checked', async () => {
    await install('codex', p.dir, quiet);
    await installMember(p.dir, { host: 'codex', id: 'sess_codex_only' });
    const r = await doctor(p.dir);
    expect(r.ok, JSON.stringify(r.data!.rows.filter((x) => x.level !== 'OK'))).toBe(true);
    expect(await hostRow(p.dir, 'claude-code')).toEqual([
      { level: 'OK', check: 'claude-code', detail: 'not installed' },
    ]);
    await rm(p.at('.codex/hooks.json'));
    await rm(p.at('.opencomms/claude-code-hooks.mjs'));
    const codex = await hostRow(p.dir, 'codex');
    expect(codex).toMatchObject([{ level: 'FAIL' }]);
    expect(codex[0]!.detail).toContain('hooks in .codex/hooks.json');
  });

  it('several pinned members of one host FAIL when the config can only ever start one of them', async () => {
    await p.write(
      '.mcp.json',
      `${JSON.stringify({ mcpServers: { opencomms: { type: 'stdio', command: 'node', args: ['.opencomms/opencomms-mcp.mjs', '.'], env: { OPENCOMMS_MEMBER_ID: 'sess_one' } } } })}\n`,
    );
    await installMember(p.dir, { id: 'sess_one' });
    await installMember(p.dir, { id: 'sess_two' });
    const fail = (await rowsOf(p.dir)).filter((r) => r.check === 'member ids' && r.level === 'FAIL');
    expect(fail.map((r) => r.detail).join()).toContain(
      '2 members are pinned for claude-code, but the config always starts the same one',
    );
    await install('claude-code', p.dir, quiet);
    expect((await rowsOf(p.dir)).filter((r) => r.check === 'member ids' && r.level === 'FAIL')).toEqual([]);
  });

  it("install-member prints a recipe that starts the member: the session's own OPENCOMMS_MEMBER_ID", async () => {
    await install('claude-code', p.dir, quiet);
    const first = await installMember(p.dir, { id: 'rev-1' });
    expect(first.result.message).toContain('.mcp.json now names it');
    const second = await installMember(p.dir, { id: 'rev-2' });
    expect(second.result.message).toContain('`OPENCOMMS_MEMBER_ID=rev-2 claude`');
    expect(JSON.parse(await p.read('.mcp.json')).mcpServers.opencomms.env.OPENCOMMS_MEMBER_ID).toBe(
      '${OPENCOMMS_MEMBER_ID:-rev-1}',
    );
  });
});

describe('projects the hosts cannot use are refused, and doctor still reports', () => {
  it('.opencomms as a plain file: doctor prints its rows and one --json document; installs and install-member refuse with nothing written', async () => {
    await p.write('.opencomms', 'not a directory');
    const text = await cli('doctor', '--project', p.dir);
    expect(text.out).toContain('[FAIL] state:');
    expect(text.out).toContain('[OK] claude-code: not installed');
    expect(text.err).not.toContain('internal error');
    const json = await cli('doctor', '--json', '--project', p.dir);
    expect(JSON.parse(json.out).data.rows.length).toBeGreaterThan(3);
    const before = await p.snapshot();
    for (const run of [
      () => install('claude-code', p.dir, quiet),
      () => install('codex', p.dir, quiet),
      () => install('opencode', p.dir, quiet),
      () => installMember(p.dir),
    ])
      expect(await run()).toMatchObject({ code: 1, result: { data: { reason: 'state_unreadable' } } });
    expect(await p.snapshot()).toEqual(before);
  });

  it('a project path with a backslash is refused at install (Node cannot load a module there) with nothing written', async () => {
    const dir = join(p.dir, 'a\\b');
    await mkdir(dir);
    for (const host of ['claude-code', 'codex', 'opencode']) {
      const r = await install(host, dir, quiet);
      expect(r, host).toMatchObject({ code: 1, result: { data: { reason: 'invalid_argument' } } });
      expect(r.result.message).toContain('backslash');
    }
    expect(existsSync(join(dir, '.opencomms'))).toBe(false);
  });

  it('from a subdirectory the project is the nearest directory with .opencomms or .git above it, and the CLI says which', async () => {
    await mkdir(p.at('src/deep'), { recursive: true });
    await mkdir(p.at('.git'));
    expect(findProjectRoot(p.at('src/deep'))).toEqual({ dir: p.dir, via: 'git' });
    await mkdir(p.at('src/.opencomms'));
    expect(findProjectRoot(p.at('src/deep'))).toEqual({ dir: p.at('src'), via: '.opencomms' });
    expect(findProjectRoot(join(tmpdir()))).toMatchObject({ via: 'start' });
    const cwd = process.cwd();
    process.chdir(p.at('src/deep'));
    try {
      const r = await cli('doctor');
      expect(r.err).toContain(
        `opencomms: project ${p.at('src')} (the nearest directory with .opencomms above ${p.at('src/deep')})`,
      );
    } finally {
      process.chdir(cwd);
    }
  });
});

describe('every installer write is durable', () => {
  it('fsyncs the file before the rename and the directory after it', async () => {
    const synced: string[] = [];
    const ops = durableOps((what) => synced.push(what));
    await applyChanges([{ path: p.at('a.json'), content: '{}\n' }], new Map([[p.at('a.json'), null]]), ops);
    expect(synced).toEqual(['file', 'directory']);
    expect(await p.read('a.json')).toBe('{}\n');
  });
});

describe('one command per project', () => {
  const none = { detect: async () => null, warn: () => {} };

  it('install with no host sets up every host found, pins a member for each MCP host, and changes nothing the second time', async () => {
    await mkdir(p.at('.claude'));
    await p.write('AGENTS.md', '# agents\n');
    const r = await installAll(p.dir, none);
    expect(r.code, r.result.message).toBe(0);
    expect(r.result.data).toMatchObject({ hosts: ['claude-code', 'codex'] });
    expect(r.result.message).toContain('claude-code (.claude in the project):');
    expect(r.result.message).toContain('codex (AGENTS.md in the project):');
    const pins = (await readdir(p.at('.opencomms/pins'))).sort();
    expect(pins).toHaveLength(2);
    expect(await p.read('.mcp.json')).not.toContain('<set by');
    expect(await p.read('.codex/config.toml')).not.toContain('<set by');
    expect(existsSync(p.at('opencode.json'))).toBe(false);
    const once = await p.snapshot();
    expect((await installAll(p.dir, none)).result.data).toMatchObject({ changed: [] });
    expect(await p.snapshot()).toEqual(once);
    expect((await uninstallAll(p.dir)).code).toBe(0);
    for (const f of CONFIGS) expect(existsSync(p.at(f)), f).toBe(false);
  });

  it('with no host found it refuses and writes nothing', async () => {
    expect(await installAll(p.dir, none)).toMatchObject({ code: 1, result: { data: { reason: 'invalid_argument' } } });
    expect(await p.snapshot()).toEqual({});
  });

  it('a git clone at a second path runs the installed hook runner and MCP server from its own files', async () => {
    const git = (cwd: string, ...args: string[]) => {
      const r = spawnSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], { cwd, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
    };
    await mkdir(p.at('.claude'));
    await p.write('AGENTS.md', '# agents\n');
    await installAll(p.dir, none);
    git(p.dir, 'init', '-q');
    git(p.dir, 'add', '-A');
    git(p.dir, 'commit', '-qm', 'configs');
    const clone = `${p.dir} clone`;
    git(tmpdir(), 'clone', '-q', p.dir, clone);
    try {
      expect(existsSync(join(clone, '.opencomms'))).toBe(false); // git-ignored: the clone installs its own bundles
      const configs = Object.fromEntries(CONFIGS.map((f) => [f, readFileSync(join(clone, f), 'utf8')]));
      expect((await installAll(clone, none)).code).toBe(0);
      for (const f of CONFIGS) expect(readFileSync(join(clone, f), 'utf8'), f).toBe(configs[f]);
      // The clone pins the members the committed configs name, so its hooks and servers agree.
      const named = [
        /OPENCOMMS_MEMBER_ID:-(sess_[0-9a-f]+)/.exec(configs['.mcp.json']!)![1],
        /OPENCOMMS_PINNED_MEMBER_ID = "(sess_[0-9a-f]+)"/.exec(configs['.codex/config.toml']!)![1],
      ];
      expect((await readdir(join(clone, '.opencomms', 'pins'))).sort()).toEqual(named.map((id) => `${id}.json`).sort());
      await rm(p.dir, { recursive: true }); // nothing of the original checkout can answer
      const hook = JSON.parse(configs['.codex/hooks.json']!).hooks.SessionStart[0].hooks[0].command as string;
      const ran = spawnSync(hook, { cwd: clone, shell: true, input: '{}', encoding: 'utf8', timeout: 20_000 });
      expect([ran.status, ran.stdout.trim()], ran.stderr).toEqual([0, '{}']);
      const args = JSON.parse(configs['.mcp.json']!).mcpServers.opencomms.args as string[];
      const server = spawnSync('node', args, { cwd: clone, input: '', encoding: 'utf8', timeout: 20_000 });
      expect(server.stderr).toContain('[opencomms-mcp] start');
      expect(server.stderr).not.toMatch(/Cannot find module|Error/);
    } finally {
      await rm(clone, { recursive: true, force: true });
    }
  });
});
