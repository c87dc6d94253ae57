// The commands that start or install something: demo, install, mcp (FEATURES.md §6.7, §7.1, §9).
// The MCP server itself is tested through the binary in test/adapters/mcp/.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PLUGIN_PATH } from '../../adapters/opencode/install.ts';
import { cli } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-cli-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('demo', () => {
  it('runs the scripted round trip and exits 0', async () => {
    const r = await cli('demo');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/2 of 2 envelopes delivered; 2 prompts handed over/);
    expect(r.out).toContain('SEND@+0ms → pending');
  });
});

describe('install', () => {
  it('opencode writes the bundle and registers it; an unknown host exits 1 listing the supported ones', async () => {
    const r = await cli('install', 'opencode', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`Installed the OpenComms plugin: ${PLUGIN_PATH}`);
    expect(existsSync(join(dir, PLUGIN_PATH))).toBe(true);
    expect(JSON.parse(await readFile(join(dir, 'opencode.json'), 'utf8')).plugin).toEqual([PLUGIN_PATH]);
    const bad = await cli('install', 'gemini', '--project', dir);
    expect(bad).toMatchObject({ code: 1, out: '' });
    expect(bad.err).toContain('install supports: opencode, claude-code, codex, claude-desktop (not "gemini")');
  });
});

describe('mcp', () => {
  it('refuses a malformed or generic host label at start (exit 1)', async () => {
    const r = await cli('mcp', '--host', 'generic', '--project', dir);
    expect(r.code).toBe(1);
  });
});
