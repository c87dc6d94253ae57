// Every command of the registry × bad input (operator.md "Command line"): each failure is exit 1,
// one line on stderr (`opencomms: …`), or under `--json` exactly one `{ok:false}` document on
// stdout with a stable `data.reason` and nothing on stderr; never a stack trace, never
// `internal error` for what the user typed or the machine they typed it on.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildProgram } from '../../src/cli/main.ts';
import { MAX_CHANNEL_NAME } from '../../src/protocol/limits.ts';
import { REASONS } from '../../src/protocol/result.ts';
import { cli, incompatibleState } from './fixtures.ts';

interface Leaf {
  path: string[];
  /** Positional placeholders: a channel-like name where the command takes one. */
  args: Array<{ name: string; required: boolean }>;
  /** Required options and a value each. */
  required: string[];
  json: boolean;
}

const REQUIRED_VALUES: Record<string, string> = {
  '--key': 'k1',
  '--to': 'file',
  '--role': 'r1',
  '--session': 's1',
};

function leaves(cmd: Command, path: string[] = []): Leaf[] {
  if (cmd.commands.length)
    return cmd.commands.filter((c) => c.name() !== 'help').flatMap((c) => leaves(c, [...path, c.name()]));
  return [
    {
      path,
      args: cmd.registeredArguments.map((a) => ({ name: a.name(), required: a.required })),
      required: cmd.options.filter((o) => o.mandatory).flatMap((o) => [o.long!, REQUIRED_VALUES[o.long!] ?? 'x']),
      json: cmd.options.some((o) => o.long === '--json'),
    },
  ];
}

const program = buildProgram({ io: { out: () => {}, err: () => {} }, exit: () => {} });
const LEAVES = leaves(program);
const name = (l: Leaf) => l.path.join(' ');
/** Positions that name a channel. */
const CHANNEL_ARGS = new Set(['channel', 'name']);
/** The commands that act on a project's state through the store. */
const STORE_USERS = new Set([
  'status',
  'channels',
  'members',
  'pause',
  'resume',
  'channel list',
  'channel get',
  'channel create',
  'channel save',
  'channel delete',
  'channel restore',
  'join-command',
  'watch',
]);
/** The commands that take no project at all. */
const NO_PROJECT = new Set(['version', 'demo']);

const fill = (l: Leaf, channel = 'team') =>
  l.args.flatMap((a) =>
    a.name === 'codex-args' || !a.required
      ? []
      : a.name === 'url'
        ? ['postgres://127.0.0.1:1/db']
        : CHANNEL_ARGS.has(a.name)
          ? [channel]
          : ['x'],
  );

let dir: string;
let missing: string;
let file: string;
let unreachable: string;
let incompatible: string;
let stateFile: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-walk-'));
  missing = join(dir, 'missing');
  file = join(dir, 'a-file');
  await writeFile(file, 'x');
  unreachable = join(dir, 'unreachable');
  await mkdir(join(unreachable, '.opencomms'), { recursive: true });
  await writeFile(
    join(unreachable, '.opencomms', 'store.json'),
    JSON.stringify({ kind: 'postgres', url: 'postgres://postgres@127.0.0.1:1/db', key: 'k1' }),
  );
  incompatible = join(dir, 'incompatible');
  await mkdir(incompatible);
  await incompatibleState(incompatible);
  await mkdir(join(dir, 'empty'));
  stateFile = join(dir, 'state-file');
  await mkdir(stateFile);
  await writeFile(join(stateFile, '.opencomms'), 'x');
  vi.stubEnv('OPENCOMMS_CODEX_BIN', join(dir, 'no-codex-here'));
});
afterAll(async () => {
  vi.unstubAllEnvs();
  await rm(dir, { recursive: true, force: true });
});

const STACK = /\n\s+at .+:\d+/;

/** Asserts the failure's shape, text and `--json`; returns the reason. */
async function failsWith(argv: string[], reason: string, withJson: boolean) {
  const t = await cli(...argv);
  const label = argv.join(' ');
  expect(t.code, label).toBe(1);
  expect(t.out, label).toBe('');
  expect(t.err, label).toMatch(/^opencomms: [^\n]+\n$/);
  expect(t.err, label).not.toMatch(STACK);
  expect(t.err, label).not.toContain('internal error');
  if (!withJson) return;
  const j = await cli(...argv, '--json');
  expect(j.code, label).toBe(1);
  expect(j.err, `${label} --json`).toBe('');
  const doc = j.json();
  expect(doc, label).toMatchObject({ ok: false, data: { reason } });
  expect(REASONS, label).toContain(doc.data.reason);
  expect(doc.message, label).not.toContain('\n');
  expect(doc.message.length, label).toBeGreaterThan(0);
}

describe('every command × bad input', () => {
  it('the registry has the commands this walk expects', () => {
    expect(LEAVES.map(name)).toEqual(
      expect.arrayContaining([...STORE_USERS, 'store init', 'store migrate', 'mcp', 'codex', 'gui', 'serve']),
    );
  });

  it.each(LEAVES.filter((l) => l.path[0] !== 'codex').map((l) => [name(l), l] as const))(
    '%s: an unknown option is usage_error',
    async (_n, l) => {
      await failsWith([...l.path, ...fill(l), ...l.required, '--bogus', '--project', dir], 'usage_error', l.json);
    },
  );

  it.each(LEAVES.filter((l) => !NO_PROJECT.has(name(l)) && name(l) !== 'doctor').map((l) => [name(l), l] as const))(
    '%s: a missing --project is project_not_found, a file is project_not_directory',
    async (_n, l) => {
      await failsWith([...l.path, ...fill(l), ...l.required, '--project', missing], 'project_not_found', l.json);
      await failsWith([...l.path, ...fill(l), ...l.required, '--project', file], 'project_not_directory', l.json);
    },
  );

  const channelTakers = LEAVES.filter((l) => l.args.some((a) => a.required && CHANNEL_ARGS.has(a.name)));
  it.each(channelTakers.map((l) => [name(l), l] as const))(
    '%s: a bad channel name and a name over the limit are invalid_channel_name',
    async (_n, l) => {
      for (const bad of ['Bad Name!', 'a'.repeat(MAX_CHANNEL_NAME + 6)])
        await failsWith(
          [...l.path, ...fill(l, bad), ...l.required, '--confirm', '--project', join(dir, 'empty')].filter(
            (a) => a !== '--confirm' || name(l) === 'session delete',
          ),
          'invalid_channel_name',
          l.json,
        );
    },
  );

  it('watch --channel with a bad name or a name over the limit', async () => {
    for (const bad of ['Bad Name!', 'a'.repeat(MAX_CHANNEL_NAME + 6)])
      await failsWith(['watch', '--channel', bad, '--project', join(dir, 'empty')], 'invalid_channel_name', true);
  });

  it('a name over the limit gets one message everywhere, naming its length and never the name it starts with', async () => {
    const long = 'a'.repeat(MAX_CHANNEL_NAME + 6);
    const messages = new Set<string>();
    for (const l of channelTakers) {
      const argv = [...l.path, ...fill(l, long), ...l.required, '--project', join(dir, 'empty'), '--json'];
      if (name(l) === 'session delete') argv.push('--confirm');
      messages.add((await cli(...argv)).json().message);
    }
    messages.add((await cli('watch', '--channel', long, '--project', join(dir, 'empty'), '--json')).json().message);
    expect([...messages]).toHaveLength(1);
    const [m] = messages;
    expect(m).toContain(`${MAX_CHANNEL_NAME + 6} characters`);
    expect(m).not.toContain('a'.repeat(MAX_CHANNEL_NAME));
  });

  it.each(['store init', 'store migrate'])('%s: a URL that is not one is invalid_argument', async (n) => {
    const argv =
      n === 'store init'
        ? ['store', 'init', 'not a url', '--key', 'k1']
        : ['store', 'migrate', '--to', 'not a url', '--key', 'k1'];
    await failsWith([...argv, '--project', join(dir, 'empty')], 'invalid_argument', true);
  });

  it.each([...STORE_USERS, 'store status'])(
    '%s: a project bound to a server that is not there is state_unreadable',
    async (n) => {
      const l = LEAVES.find((x) => name(x) === n)!;
      await failsWith([...l.path, ...fill(l), ...l.required, '--project', unreachable], 'state_unreadable', l.json);
    },
  );

  it.each([...STORE_USERS])('%s: a state.json of a later schema is state_incompatible', async (n) => {
    const l = LEAVES.find((x) => name(x) === n)!;
    await failsWith([...l.path, ...fill(l), ...l.required, '--project', incompatible], 'state_incompatible', l.json);
  });

  it.each([...STORE_USERS, 'store status', 'store migrate'])(
    '%s: a .opencomms that is a file is state_unreadable, named as such',
    async (n) => {
      const l = LEAVES.find((x) => name(x) === n)!;
      await failsWith([...l.path, ...fill(l), ...l.required, '--project', stateFile], 'state_unreadable', l.json);
      expect((await cli(...l.path, ...fill(l), ...l.required, '--project', stateFile)).err).toContain(
        `${join(stateFile, '.opencomms')} is not a directory`,
      );
    },
  );

  it('codex without Codex on the PATH is host_not_found', async () => {
    await failsWith(['codex', '--project', join(dir, 'empty')], 'host_not_found', false);
  });

  it('gui and serve with a port or an address they cannot use are invalid_argument', async () => {
    for (const c of ['gui', 'serve']) {
      await failsWith([c, '--port', '0x50', '--project', dir], 'invalid_argument', false);
      await failsWith([c, '--bind', '0.0.0.0', '--project', dir], 'invalid_argument', false);
    }
  });
});
