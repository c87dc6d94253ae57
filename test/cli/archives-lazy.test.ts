// Archives are read lazily (FEATURES.md §2.6): listing saved channels parses only the archives
// that changed since the index was written (heads keyed by file identity, written with each
// archive), and `channel get` shows a saved channel from its head, parsing no archive, so
// `channel list` / `channel get` cost what they show, not every archive of the project. Reads
// write no archive index.
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { archiveStats } from '../../src/store/file/archives.ts';
import { resolvePaths } from '../../src/store/index.ts';
import { cli } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-lazy-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

/** Whole archives `fn` parsed. */
async function parses(fn: () => Promise<unknown>): Promise<number> {
  const before = archiveStats.parsed;
  await fn();
  return archiveStats.parsed - before;
}
const must = async (...argv: string[]) => {
  const r = await cli(...argv, '--project', dir);
  if (r.code !== 0) throw new Error(`${argv.join(' ')}: ${r.err}`);
  return r;
};

describe('lazy archives', () => {
  it('list parses only new or changed archives; get parses none', async () => {
    for (let i = 0; i < 5; i++) {
      await must('channel', 'create', `old-${i}`);
      await must('channel', 'save', `old-${i}`, '--summary', `Session ${i}.`);
    }
    // Each save wrote the index beside its archive: a listing parses nothing, in any process.
    expect(await parses(() => must('channel', 'list'))).toBe(0);
    const list = (await must('channel', 'list', '--json')).json().data.archived as Array<{ name: string }>;
    expect(list.map((a) => a.name)).toEqual(['old-4', 'old-3', 'old-2', 'old-1', 'old-0']);

    let got: any;
    expect(await parses(async () => (got = (await must('channel', 'get', 'old-3', '--json')).json()))).toBe(0);
    expect(got.data).toMatchObject({ kind: 'archived', name: 'old-3', summary: 'Session 3.' });

    // A save parses only the archive it adds (to index it); the listing after it none.
    expect(
      await parses(async () => {
        await must('channel', 'create', 'new');
        return must('channel', 'save', 'new');
      }),
    ).toBe(1);
    expect(await parses(() => must('channel', 'list'))).toBe(0);

    // A file changed by hand is read again, and an invalid one is reported (doctor) and skipped.
    const archives = resolvePaths(dir).archives;
    const victim = (await readdir(archives)).find((n) => n.startsWith('chn_'))!;
    await writeFile(join(archives, victim), '{');
    const index = await readFile(join(archives, '.index.json'), 'utf8');
    expect(await parses(() => must('channel', 'list'))).toBe(1);
    expect(await parses(() => must('channel', 'list'))).toBe(0); // remembered in this process
    expect(await readFile(join(archives, '.index.json'), 'utf8')).toBe(index); // a read writes nothing
    expect((await must('channel', 'list', '--json')).json().data.archived).toHaveLength(5);
    expect((await cli('doctor', '--project', dir)).out).toContain(
      `[WARN] archives: archives/${victim} is skipped: not valid JSON`,
    );
  });

  it('a damaged index is rebuilt from the archives, never trusted', async () => {
    await must('channel', 'create', 'kept');
    await must('channel', 'save', 'kept', '--summary', 'The real one.');
    await must('channel', 'list');
    const index = join(resolvePaths(dir).archives, '.index.json');
    await writeFile(index, JSON.stringify({ 'chn_forged.json': { key: '1:2:3:4:5', head: { name: 'forged' } } }));
    const list = (await must('channel', 'list', '--json')).json().data.archived as Array<{
      name: string;
      description: string | null;
    }>;
    expect(list.map((a) => a.name)).toEqual(['kept']);
    await writeFile(index, 'not json');
    expect((await must('channel', 'get', 'kept', '--json')).json().data.summary).toBe('The real one.');
  });
});
