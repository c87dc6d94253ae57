// `opencomms install` in a project whose host config does not parse: every config of every host
// it would install is read before anything is written, and a malformed one is refused by file,
// line and column (config_malformed) in one line, with nothing written for any host.
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-install-bad-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

const MALFORMED_MCP = '{\n  "mcpServers": {\n    "other": { "command": "x" },,\n  }\n}\n';

async function threeHosts() {
  await writeFile(join(dir, 'opencode.json'), '{}\n');
  await writeFile(join(dir, '.mcp.json'), MALFORMED_MCP);
  await mkdir(join(dir, '.codex'));
}

const listing = () => readdirSync(dir, { recursive: true }).map(String).sort();

describe('install with a malformed host config', () => {
  it('install with no host names the file, line and column, and writes nothing for any host', async () => {
    await threeHosts();
    const before = listing();
    const r = await cli('install', '--project', dir);
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/^opencomms: [^\n]+\n$/);
    expect(r.err).toContain('.mcp.json: line 3, column 33: property name expected');
    expect(r.err).toContain('nothing was written');
    expect(listing()).toEqual(before);
    expect(await readFile(join(dir, 'opencode.json'), 'utf8')).toBe('{}\n');
    expect(existsSync(join(dir, '.opencomms'))).toBe(false);
    const j = await cli('install', '--project', dir, '--json');
    expect(j.err).toBe('');
    expect(j.json()).toMatchObject({
      ok: false,
      data: { reason: 'config_malformed', files: [{ file: '.mcp.json', line: 3, column: 33 }] },
    });
  });

  it('every malformed file is named, TOML included; one host alone names its own', async () => {
    await threeHosts();
    await writeFile(join(dir, '.codex', 'config.toml'), 'model = "o4"\n[mcp_servers\n');
    const r = await cli('install', '--project', dir, '--json');
    expect(r.json().data.files.map((f: { file: string; line: number }) => [f.file, f.line])).toEqual([
      ['.mcp.json', 3],
      ['.codex/config.toml', 3],
    ]);
    const one = await cli('install', 'claude-code', '--project', dir);
    expect(one.code).toBe(1);
    expect(one.err).toContain('.mcp.json: line 3, column 33: property name expected');
    expect(existsSync(join(dir, '.opencomms'))).toBe(false);
  });

  it('a well-formed project installs every host and prints its report on stdout', async () => {
    await threeHosts();
    await writeFile(join(dir, '.mcp.json'), '{}\n');
    const r = await cli('install', '--project', dir);
    expect(r.code).toBe(0);
    for (const h of ['opencode', 'claude-code', 'codex']) expect(r.out).toContain(`${h} (`);
  });
});
