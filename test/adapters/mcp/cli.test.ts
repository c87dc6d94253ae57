// `opencomms mcp` as the hosts start it (the real binary, which runs the server bundle): its help,
// the project it is given, the answers it owes when its input ends, and the text of its -32602.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BIN } from '../../helpers/process.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-mcp-cli-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

const PIN = 'sess_aaaaaaaaaaaaaaaaaaaaaaaa';

/** Runs `opencomms <argv>` with `input` as its whole stdin (then end of input). */
function run(argv: string[], input = ''): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const env = { ...process.env, OPENCOMMS_MEMBER_ID: PIN };
    const child = spawn(process.execPath, [BIN, ...argv], { env, stdio: 'pipe' });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (err += d));
    child.stdin.on('error', () => {});
    child.on('exit', (code) => setImmediate(() => resolve({ code, out, err })));
    child.stdin.end(input);
  });
}

const line = (m: object) => `${JSON.stringify(m)}\n`;
const create = (id: number, channel: string) =>
  line({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: 'opencomms_create', arguments: { channel, role: 'Lead', role_prompt: 'Lead it.' } },
  });

describe('opencomms mcp', () => {
  it('--help and -h print its usage on stdout and exit 0', async () => {
    for (const flag of ['--help', '-h']) {
      const r = await run(['mcp', flag]);
      expect(r.code, flag).toBe(0);
      expect(r.err, flag).toBe('');
      expect(r.out, flag).toMatch(/^Usage: opencomms mcp /);
      for (const o of ['--project', '--host', '--admin', 'OPENCOMMS_MEMBER_ID']) expect(r.out, flag).toContain(o);
    }
    const bad = await run(['mcp', '--bogus']);
    expect(bad.code).toBe(1);
    expect(bad.err).toBe(
      "[opencomms-mcp] refusing to start (usage_error): Unknown option '--bogus'. Run `opencomms mcp --help` for its usage.\n",
    );
  });

  it('a project that does not exist or is a file is refused in one line, and nothing is created', async () => {
    const missing = join(dir, 'nope');
    for (const argv of [
      ['mcp', '--project', missing],
      ['mcp', missing],
    ]) {
      const r = await run(argv, create(1, 'x1'));
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.out).toBe('');
      expect(r.err).toBe(
        `[opencomms-mcp] refusing to start (project_not_found): The project directory ${missing} does not exist. Pass an existing project with --project <dir>.\n`,
      );
      expect(existsSync(missing)).toBe(false);
    }
    const file = join(dir, 'a-file');
    await writeFile(file, 'x');
    const r = await run(['mcp', '--project', file], create(1, 'x1'));
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      `[opencomms-mcp] refusing to start (project_not_directory): ${file} is a file, not a directory. Pass the project's directory with --project <dir>.\n`,
    );
  });

  it('answers every request it read before its input ended, then exits 0', async () => {
    const r = await run(['mcp', '--project', dir], create(1, 'x1'));
    expect(r.code).toBe(0);
    const answers = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatchObject({ jsonrpc: '2.0', id: 1, result: { isError: false } });
    const two = await run(['mcp', '--project', dir], create(2, 'x2') + create(3, 'x3'));
    expect(two.code).toBe(0);
    expect(
      two.out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual([2, 3]);
  });

  it('a -32602 says its reason once, without the SDK\'s "MCP error -32602:" prefix', async () => {
    const r = await run(
      ['mcp', '--project', dir],
      line({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'opencomms_create', arguments: { channel: 'x' } },
      }) + line({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'opencomms_nope', arguments: {} } }),
    );
    const answers = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(answers.map((a) => a.error?.code)).toEqual([-32602, -32602]);
    for (const a of answers) expect(a.error.message).not.toMatch(/MCP error/);
    expect(answers[0].error.message).toBe('Missing required argument(s) for opencomms_create: role, role_prompt');
    expect(answers[1].error.message).toBe('Unknown tool: opencomms_nope');
  });
});
