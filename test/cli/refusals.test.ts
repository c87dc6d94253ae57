// What the CLI answers when the project or the command line is wrong (FEATURES.md §9: every
// refusal a message and exit 1, one document under --json, never a stack trace): usage errors,
// `--project` naming nothing or a file, a read-only store, an oversized state.json, a port that
// is not plain decimal, a channel name longer than any channel's.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_CHANNEL_NAME } from '../../src/protocol/limits.ts';
import { resolvePaths } from '../../src/store/index.ts';
import { BIN } from '../helpers/process.ts';
import { withReadOnly } from '../helpers/read-only.ts';
import { cli, liveProject } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-refuse-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

/** The real binary: what the operator's terminal shows, the runtime's own log lines included. */
async function bin(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await promisify(execFile)(process.execPath, [BIN, ...argv], { maxBuffer: 1 << 24 });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}
const STACK = /\n\s+at .+:\d+/;

describe('usage errors under --json', () => {
  it('an unknown option and a missing argument print one refusal document (exit 1)', async () => {
    for (const argv of [
      ['status', '--json', '--bogus'],
      ['members', '--json'],
    ]) {
      const r = await cli(...argv, '--project', dir);
      expect(r.code).toBe(1);
      const doc = r.json();
      expect(doc).toMatchObject({ ok: false, data: { reason: 'usage_error' } });
      expect(doc.message).toContain('opencomms help');
    }
  });
});

describe('--project', () => {
  it('a missing directory is refused and not created', async () => {
    const missing = join(dir, 'nope');
    const r = await cli('channel', 'create', 'alpha', '--project', missing, '--json');
    expect(r.code).toBe(1);
    expect(r.json()).toMatchObject({ ok: false, data: { reason: 'project_not_found' } });
    expect(r.json().message).toContain(missing);
    expect((await cli('status', '--project', missing)).err).toContain(
      `The project directory ${missing} does not exist`,
    );
    expect(existsSync(missing)).toBe(false);
  });

  it('a file is refused with a message, no stack; doctor still answers with rows', async () => {
    const file = join(dir, 'a-file');
    await writeFile(file, 'x');
    const create = await bin('channel', 'create', 'alpha', '--project', file);
    expect(create.code).toBe(1);
    expect(create.err).toBe(
      `opencomms: ${file} is a file, not a directory. Pass the project's directory with --project <dir>.\n`,
    );
    const doc = await bin('doctor', '--json', '--project', file);
    expect(doc.code).toBe(1);
    const report = JSON.parse(doc.out);
    expect(report.ok).toBe(false);
    expect(report.data.rows[0]).toMatchObject({ level: 'FAIL', check: 'project' });
    const text = await bin('doctor', '--project', file);
    expect(text.out).toMatch(/^\[FAIL\] project: .* is a file, not a directory/);
    expect(text.err).not.toMatch(STACK);
  });
});

describe('a read-only .opencomms', () => {
  it('CLI writes answer store_unwritable without a stack; reads still work; doctor fails it', async () => {
    expect((await cli('channel', 'create', 'alpha', '--project', dir)).code).toBe(0);
    await withReadOnly(dir, async () => {
      const w = await bin('channel', 'create', 'beta', '--project', dir);
      expect(w.code).toBe(1);
      expect(w.err).not.toMatch(STACK);
      expect(w.err).not.toContain('Retry once');
      expect(w.err).toContain('refuses writes');
      const j = await bin('channel', 'save', 'alpha', '--project', dir, '--json');
      expect(JSON.parse(j.out)).toMatchObject({ ok: false, data: { reason: 'store_unwritable' } });
      expect((await bin('status', '--project', dir)).code).toBe(0);
      const doc = await bin('doctor', '--json', '--project', dir);
      expect(doc.code).toBe(1);
      const rows = JSON.parse(doc.out).data.rows as Array<{ level: string; check: string; detail: string }>;
      expect(rows.find((r) => r.check === 'writable')).toMatchObject({ level: 'FAIL' });
      expect(rows.find((r) => r.check === 'writable')!.detail).toMatch(/^\.opencomms \((EROFS|EACCES)\)/);
    });
    expect((await cli('doctor', '--project', dir)).out).toContain('[OK] writable: ');
  });
});

describe('an oversized state.json', () => {
  it('status refuses it by name and size; doctor reports it as a FAIL row', async () => {
    const p = resolvePaths(dir);
    expect((await cli('channel', 'create', 'alpha', '--project', dir)).code).toBe(0);
    await truncate(p.state, 600 * 1024 * 1024); // sparse: nothing is written
    const s = await bin('status', '--project', dir, '--json');
    expect(s.code).toBe(1);
    const doc = JSON.parse(s.out);
    expect(doc).toMatchObject({ ok: false, data: { reason: 'state_too_large', bytes: 600 * 1024 * 1024 } });
    expect(doc.message).toContain('600 MiB, over the 256 MiB');
    const d = await bin('doctor', '--project', dir);
    expect(d.code).toBe(1);
    expect(d.out).toMatch(/^\[FAIL\] state: .*600 MiB/m);
    expect(d.out).toMatch(/failure\(s\)/);
  });
});

describe('plain values', () => {
  it('serve --port takes decimal digits only', async () => {
    for (const port of ['0x50', '1e3', '+80', ' 80', '80.0']) {
      const r = await cli('serve', '--port', port, '--project', dir);
      expect(r.code, port).toBe(1);
      expect(r.err).toContain('--port must be a whole number from 1 to 65535 in decimal digits');
    }
  });

  it('a channel name over the limit is refused as too long, never as the name it starts with', async () => {
    const name = 'a'.repeat(MAX_CHANNEL_NAME);
    expect((await cli('channel', 'create', name, '--project', dir)).code).toBe(0);
    const r = await cli('channel', 'save', `${name}b`, '--project', dir, '--json');
    expect(r.json()).toMatchObject({ ok: false, data: { reason: 'invalid_channel_name' } });
    expect(r.json().message).toContain(
      `it has ${MAX_CHANNEL_NAME + 1} characters, and a channel name has at most ${MAX_CHANNEL_NAME}`,
    );
    expect(r.json().message).not.toContain(name);
    expect((await cli('channel', 'get', name, '--project', dir)).code).toBe(0); // still live: nothing was saved
  });
});

describe('refusals speak to the operator', () => {
  it('no CLI refusal sends the operator to the operator or to an MCP tool', async () => {
    await liveProject(dir);
    expect((await cli('pause', 'team', '--project', dir)).code).toBe(0);
    const runs = [
      ['channel', 'get', 'nosuch'],
      ['channel', 'save', 'nosuch'],
      ['channel', 'delete', 'nosuch', '--confirm'],
      ['channel', 'restore', 'nosuch'],
      ['members', 'nosuch'],
      ['pause', 'nosuch'],
      ['join-command', 'nosuch'],
      ['send', 'team', 'hello', '--to', 'Lead'],
      ['send', 'old', 'hello', '--to', 'Lead'],
    ];
    for (const argv of runs) {
      const r = await cli(...argv, '--project', dir);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.err, argv.join(' ')).toMatch(/^opencomms: [^\n]+\n$/);
      expect(r.err, argv.join(' ')).not.toMatch(/report this to the operator|opencomms_[a-z]/);
    }
    expect((await cli('channel', 'restore', 'nosuch', '--project', dir)).err).toContain('`opencomms channel list`');
  });

  it('session delete without --confirm says what this deletion removes', async () => {
    await liveProject(dir);
    const live = await cli('channel', 'delete', 'team', '--project', dir, '--json');
    expect(live.json()).toMatchObject({ ok: false, data: { reason: 'confirm_required' } });
    expect(live.json().message).toContain('its members and undelivered mail are discarded');
    expect(live.json().message).not.toContain('archive');
    const saved = await cli('channel', 'delete', 'old', '--project', dir, '--json');
    expect(saved.json().message).toContain('its archive and history are removed');
    expect((await cli('channel', 'get', 'team', '--project', dir)).code).toBe(0);
  });
});
