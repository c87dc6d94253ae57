// `npm run viz` writes only what differs and says so: a second run writes nothing and says the
// diagrams are current.
import { cp, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { regenerate } from '../scripts/viz.ts';
import { DIAGRAMS_DOC } from '../src/viz/doc-diagrams.ts';

const repo = join(import.meta.dirname, '..');
let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'oc-viz-'));
  await cp(join(repo, 'visualizations'), join(root, 'visualizations'), { recursive: true });
  await mkdir(join(root, 'docs'));
  await cp(join(repo, DIAGRAMS_DOC), join(root, DIAGRAMS_DOC));
});
afterEach(() => rm(root, { recursive: true, force: true }));

describe('npm run viz', () => {
  it('writes what differs, then nothing, and says which', async () => {
    await writeFile(join(root, 'visualizations', 'channel.mmd'), 'stale\n');
    const first = regenerate(root);
    expect(first).toContain('wrote visualizations/channel.mmd');
    const mtime = (await stat(join(root, 'visualizations', 'channel.mmd'))).mtimeMs;
    const doc = await readFile(join(root, DIAGRAMS_DOC), 'utf8');
    const second = regenerate(root);
    expect(second).toEqual([expect.stringMatching(/^Every diagram is current \(\d+ files\); nothing was written\.$/)]);
    expect((await stat(join(root, 'visualizations', 'channel.mmd'))).mtimeMs).toBe(mtime);
    expect(await readFile(join(root, DIAGRAMS_DOC), 'utf8')).toBe(doc);
  });
});
