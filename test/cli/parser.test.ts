// The command line itself (FEATURES.md §9, INS-6): generated help, exit codes, unknown commands
// named and pointed to help, `--project` in any position, and the real binary answering the same.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.ts';
import { COMMANDS } from '../../src/cli/registry.ts';
import { VERSION } from '../../src/version.ts';
import { cli } from './fixtures.ts';

const bin = join(import.meta.dirname, '..', '..', 'bin', 'opencomms.js');
const run = promisify(execFile);
let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-cli-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('help', () => {
  it('no arguments and `help` print the usage list and exit 0', async () => {
    for (const argv of [[], ['help'], ['--help']]) {
      const r = await cli(...argv);
      expect(r.code).toBe(0);
      for (const name of [
        'status',
        'channels',
        'members',
        'channel',
        'join-command|join',
        'watch',
        'gui',
        'serve',
        'doctor',
        'install',
        'mcp',
        'demo',
        'version',
        'help',
      ])
        expect(r.out).toContain(name);
      expect(r.out).toContain('--project <dir>');
    }
  });

  it('`help <command>` shows that command, its subcommands and options', async () => {
    const r = await cli('help', 'channel');
    expect(r.code).toBe(0);
    for (const sub of ['list', 'get', 'create', 'save', 'delete', 'restore'])
      expect(r.out).toMatch(new RegExp(`\\n\\s+${sub} `));
    expect((await cli('channel', 'create', '--help')).out).toContain('--max-members <n>');
  });

  it('every command of the registry is in the generated help', async () => {
    const listed = (await cli('help')).out;
    const program = buildProgram({ io: { out: () => {}, err: () => {} }, exit: () => {} });
    expect(program.commands.length).toBeGreaterThanOrEqual(COMMANDS.length);
    for (const c of program.commands) expect(listed).toMatch(new RegExp(`^\\s+${c.name()}\\b`, 'm'));
  });
});

describe('INS-6 unknown commands and --project anywhere', () => {
  it('an unknown command exits 1, names itself and points to help', async () => {
    const r = await cli('frobnicate', '--project', dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain("unknown command 'frobnicate'");
    expect(r.err).toContain('opencomms help');
    expect(r.out).toBe('');
    const sub = await cli('channel', 'explode');
    expect(sub.code).toBe(1);
    expect(sub.err).toContain("unknown command 'explode'");
  });

  it('`session` is no command: one usage line names `opencomms channel …` (a session is a host session)', async () => {
    const r = await cli('session', 'list', '--project', dir);
    expect(r).toMatchObject({ code: 1, out: '' });
    expect(r.err).toMatch(/^opencomms: unknown command 'session': [^\n]*`opencomms channel …`[^\n]*\n$/);
    const j = (await cli('session', 'restore', 'x', '--json')).json();
    expect(j).toMatchObject({ ok: false, data: { reason: 'usage_error' } });
  });

  it('a command group alone prints its help on stdout (exit 0); help of no such command is one usage line', async () => {
    for (const argv of [['channel'], ['store'], ['--project', dir, 'channel']]) {
      const r = await cli(...argv);
      expect(r.code, argv.join(' ')).toBe(0);
      expect(r.err).toBe('');
      expect(r.out).toMatch(new RegExp(`^Usage: opencomms ${argv.at(-1)} `));
    }
    const r = await cli('help', 'nosuch');
    expect(r).toMatchObject({ code: 1, out: '' });
    expect(r.err).toBe("opencomms: unknown command 'nosuch'. Run `opencomms help` for the list of commands.\n");
    expect((await cli('help', 'nosuch', '--json')).json()).toMatchObject({
      ok: false,
      data: { reason: 'usage_error' },
    });
    expect((await cli('help', 'join')).code).toBe(0);
  });

  it('unknown options and missing arguments are usage errors (exit 1)', async () => {
    const opt = await cli('status', '--bogus');
    expect(opt.code).toBe(1);
    expect(opt.err).toContain("unknown option '--bogus'");
    const arg = await cli('members');
    expect(arg.code).toBe(1);
    expect(arg.err).toContain("missing required argument 'channel'");
  });

  it('--project works before the command, between subcommands and at the end', async () => {
    expect((await cli('--project', dir, 'channel', 'create', 'a')).code).toBe(0);
    expect((await cli('channel', '--project', dir, 'create', 'b')).code).toBe(0);
    expect((await cli('channel', 'create', 'c', '--project', dir)).code).toBe(0);
    expect((await cli('channel', 'create', `--project=${dir}`, 'd')).code).toBe(0);
    const list = await cli('channels', '--json', '--project', dir);
    expect(list.json().data.live.map((c: { name: string }) => c.name)).toEqual(['a', 'b', 'c', 'd']);
  });
});

describe('version', () => {
  it('prints the version and the schema, or one JSON document', async () => {
    const t = await cli('version');
    expect(t).toMatchObject({ code: 0, out: `opencomms ${VERSION} (state schema v2)\n`, err: '' });
    expect((await cli('version', '--json')).json()).toEqual({
      ok: true,
      message: `opencomms ${VERSION} (state schema v2)`,
      data: { version: VERSION, schema: 2 },
    });
  });
});

describe('the real binary', () => {
  it('exits 1 on an unknown command with the hint on stderr, 0 with one JSON document on a read', async () => {
    const bad = await run(process.execPath, [bin, 'nope', '--project', dir]).catch(
      (e: { code: number; stderr: string; stdout: string }) => e,
    );
    expect(bad).toMatchObject({ code: 1, stdout: '' });
    expect((bad as { stderr: string }).stderr).toMatch(/unknown command 'nope'[\s\S]*opencomms help/);
    const ok = await run(process.execPath, [bin, 'status', '--project', dir, '--json']);
    expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, data: { channels: [], pending_messages: 0 } });
    expect(ok.stdout.trim().split('\n')).toHaveLength(1);
  });
});
