// doctor finds the damage the store set aside or recorded (FEATURES.md §9, docs/RELIABILITY.md):
// a journal preserved as corrupt, a damage entry in state.errors, a store that refuses new files.
// Each is a FAIL; a probe leaves nothing behind.
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolvePaths } from '../../src/store/index.ts';
import { cli, corruptState } from '../cli/fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-damage-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

type Row = { level: string; check: string; detail: string };
const report = async () => {
  const r = await cli('doctor', '--json', '--project', dir);
  return { code: r.code, rows: r.json().data.rows as Row[] };
};
const rowOf = (rows: Row[], check: string) => rows.find((r) => r.check === check);

describe('doctor and damage', () => {
  it('a journal set aside as corrupt is a FAIL naming it', async () => {
    expect((await cli('channel', 'create', 'alpha', '--project', dir)).code).toBe(0);
    const p = resolvePaths(dir);
    await mkdir(p.journal, { recursive: true });
    await writeFile(join(p.journal, 'j0123456789abcdef.corrupt.1700000000000.jsonl'), '{"n":1,"ops":[]}\n{"n":2,"op');
    const { code, rows } = await report();
    expect(code).toBe(1);
    expect(rowOf(rows, 'corrupt journals')).toMatchObject({ level: 'FAIL' });
    expect(rowOf(rows, 'corrupt journals')!.detail).toContain('journal/j0123456789abcdef.corrupt.1700000000000.jsonl');
  });

  it('damage recorded in state.errors (a corrupt state.json preserved by recovery) is a FAIL', async () => {
    await corruptState(dir);
    expect((await cli('channel', 'create', 'alpha', '--project', dir)).code).toBe(0); // recovers: preserves the file, records it
    const { code, rows } = await report();
    expect(code).toBe(1);
    const damage = rowOf(rows, 'damage')!;
    expect(damage.level).toBe('FAIL');
    expect(damage.detail).toMatch(
      /^1 recorded in state\.errors; newest: .* state_corrupt: .*state\.corrupt\.\d+\.json/,
    );
  });

  it('a healthy project: writable, no damage, and the probe leaves no file', async () => {
    expect((await cli('channel', 'create', 'alpha', '--project', dir)).code).toBe(0);
    const before = await readdir(resolvePaths(dir).dir);
    const { code, rows } = await report();
    expect(code).toBe(0);
    expect(rowOf(rows, 'writable')).toMatchObject({ level: 'OK' });
    expect(rowOf(rows, 'damage')).toMatchObject({ level: 'OK', detail: 'none recorded' });
    expect(rowOf(rows, 'corrupt journals')).toMatchObject({ level: 'OK', detail: 'none' });
    expect(await readdir(resolvePaths(dir).dir)).toEqual(before);
  });
});
