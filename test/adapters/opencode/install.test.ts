// `opencomms install opencode` (FEATURES.md §6.7, INS-1/INS-2): idempotent, other keys and JSONC
// comments preserved, a malformed config means zero writes, and the bundle is self-contained.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BUNDLE_MARK, installOpenCode, PLUGIN_PATH } from '../../../adapters/opencode/install.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-install-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('install opencode', () => {
  it('creates opencode.json with the entry and a self-contained bundle exporting one plugin', async () => {
    const r = await installOpenCode(dir);
    expect(r.ok).toBe(true);
    expect(JSON.parse(await readFile(join(dir, 'opencode.json'), 'utf8')).plugin).toEqual([PLUGIN_PATH]);
    const bundle = await readFile(join(dir, PLUGIN_PATH), 'utf8');
    expect(bundle.startsWith(BUNDLE_MARK)).toBe(true);
    const specifiers = [
      ...bundle.matchAll(/^\s*(?:import|export)\b[^;'"]*?\bfrom\s*["']([^"']+)["']/gm),
      ...bundle.matchAll(/^\s*import\s*["']([^"']+)["']/gm),
      ...bundle.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
    ].map((m) => m[1]!);
    expect(specifiers.length).toBeGreaterThan(0);
    const bare = specifiers.filter((s) => !s.startsWith('node:'));
    expect(bare).toEqual([]);
    const mod = await import(join(dir, PLUGIN_PATH));
    expect(Object.keys(mod)).toEqual(['OpenCommsPlugin']);
  }, 30_000);

  it('is idempotent and keeps other keys, a string plugin becomes an array, JSONC comments survive', async () => {
    await writeFile(join(dir, 'opencode.jsonc'), '{\n  // my model\n  "model": "x/y",\n  "plugin": "other.js"\n}\n');
    expect((await installOpenCode(dir)).ok).toBe(true);
    const once = await readFile(join(dir, 'opencode.jsonc'), 'utf8');
    expect(once).toContain('// my model');
    expect(once).toContain('"model": "x/y"');
    expect(once).toMatch(/"plugin": \[\s*"other\.js",\s*"\.opencode\/plugins\/opencomms\.js"\s*\]/);
    const r = await installOpenCode(dir);
    expect(r.data).toMatchObject({ config_changed: false });
    expect(await readFile(join(dir, 'opencode.jsonc'), 'utf8')).toBe(once);
    expect(existsSync(join(dir, 'opencode.json'))).toBe(false);
  }, 30_000);

  it('a malformed config, or a plugin field of another type, means zero writes', async () => {
    await writeFile(join(dir, 'opencode.json'), '{ "plugin": [ ');
    const bad = await installOpenCode(dir);
    expect(bad).toMatchObject({ ok: false, data: { reason: 'config_malformed' } });
    expect(existsSync(join(dir, '.opencode'))).toBe(false);
    expect(await readFile(join(dir, 'opencode.json'), 'utf8')).toBe('{ "plugin": [ ');
    await writeFile(join(dir, 'opencode.json'), '{ "plugin": 3 }');
    expect(await installOpenCode(dir)).toMatchObject({ ok: false, data: { reason: 'config_malformed' } });
    expect(await readFile(join(dir, 'opencode.json'), 'utf8')).toBe('{ "plugin": 3 }');
    expect(existsSync(join(dir, PLUGIN_PATH))).toBe(false);
  });

  it('warns before replacing a plugins/opencomms.js that is not ours, and never touches other plugins', async () => {
    await mkdir(join(dir, '.opencode', 'plugins'), { recursive: true });
    await writeFile(join(dir, PLUGIN_PATH), 'export const Mine = 1;');
    await writeFile(join(dir, '.opencode', 'plugins', 'other.js'), 'export const Other = 1;');
    const warnings: string[] = [];
    expect((await installOpenCode(dir, (w) => warnings.push(w))).ok).toBe(true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(PLUGIN_PATH);
    expect((await readFile(join(dir, PLUGIN_PATH), 'utf8')).startsWith(BUNDLE_MARK)).toBe(true); // replaced by ours
    expect(await readFile(join(dir, '.opencode', 'plugins', 'other.js'), 'utf8')).toBe('export const Other = 1;');
    // Ours is replaced silently on the next install.
    expect((await installOpenCode(dir, (w) => warnings.push(w))).ok).toBe(true);
    expect(warnings).toHaveLength(1);
  }, 30_000);
});
