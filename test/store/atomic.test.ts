import { renameSync } from 'node:fs';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeAtomic } from '../../src/store/file/atomic.ts';
import { storeFs } from '../../src/store/file/fs.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { counterOf, entriesOf, incrementCounter, tempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup } = await tempProject()));
afterEach(() => cleanup());

/** The store's rename, failing `n` times with EBUSY and then behaving, while `fn` runs. */
async function flakyRename<T>(n: number, fn: (calls: string[]) => Promise<T>): Promise<T> {
  const calls: string[] = [];
  storeFs.renameSync = (from, to) => {
    calls.push(String(from));
    if (calls.length <= n) throw Object.assign(new Error('EBUSY: resource busy'), { code: 'EBUSY' });
    renameSync(from, to);
  };
  try {
    return await fn(calls);
  } finally {
    storeFs.renameSync = renameSync;
  }
}

describe('writeAtomic', () => {
  it('names the temp file <prefix>.<pid>.<8 hex>.tmp in the target directory', async () => {
    const calls = await flakyRename(0, async (c) => {
      await writeAtomic(join(dir, 'x.json'), 'hi', { tmpPrefix: '.state' });
      return c;
    });
    expect(calls[0]).toMatch(new RegExp(`^${dir}/\\.state\\.${process.pid}\\.[0-9a-f]{8}\\.tmp$`));
    expect(await readFile(join(dir, 'x.json'), 'utf8')).toBe('hi');
  });

  it('a rename that keeps failing throws, keeps the previous file, leaves no temp', async () => {
    await writeFile(join(dir, 'x.json'), 'old');
    const calls = await flakyRename(Infinity, async (c) => {
      await expect(writeAtomic(join(dir, 'x.json'), 'new', { tmpPrefix: '.state' })).rejects.toThrow('EBUSY');
      return c;
    });
    expect(calls).toHaveLength(3); // at 0, 50 and 100 ms
    expect(await readFile(join(dir, 'x.json'), 'utf8')).toBe('old');
    expect(await readdir(dir)).toEqual(['x.json']);
  });

  it('a rename that fails twice then succeeds saves', async () => {
    await writeFile(join(dir, 'x.json'), 'old');
    const t0 = performance.now();
    const calls = await flakyRename(2, async (c) => {
      await writeAtomic(join(dir, 'x.json'), 'new', { tmpPrefix: '.state' });
      return c;
    });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140); // waited 50 + 100 ms
    expect(calls).toHaveLength(3);
    expect(await readFile(join(dir, 'x.json'), 'utf8')).toBe('new');
    expect(await readdir(dir)).toEqual(['x.json']);
  });

  it('a failing guard aborts before the rename and cleans up', async () => {
    await writeFile(join(dir, 'x.json'), 'old');
    const guard = () => {
      throw new Error('lock lost');
    };
    await expect(writeAtomic(join(dir, 'x.json'), 'new', { tmpPrefix: '.state', guard })).rejects.toThrow('lock lost');
    expect(await readdir(dir)).toEqual(['x.json']);
    expect(await readFile(join(dir, 'x.json'), 'utf8')).toBe('old');
  });

  it('a write failure (target directory missing) leaves nothing behind', async () => {
    await expect(writeAtomic(join(dir, 'nope', 'x.json'), 'new', { tmpPrefix: '.state' })).rejects.toThrow(/ENOENT/);
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('store save through a failing rename', () => {
  // compactBytes 0: every mutation writes a snapshot (state.json) instead of a journal line.
  it('keeps the previous state.json, leaves no temp, and saves once rename recovers', async () => {
    const good = new FileStore(dir);
    await good.mutate(incrementCounter);
    const file = join(dir, '.opencomms', 'state.json');
    const before = await readFile(file);
    const bad = new FileStore(dir, { compactBytes: 0 });
    await flakyRename(Infinity, () => expect(bad.mutate(incrementCounter)).rejects.toThrow('EBUSY'));
    expect(await readFile(file)).toEqual(before);
    expect((await entriesOf(join(dir, '.opencomms'))).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    expect(counterOf(await bad.read())).toBe(1);
    const twice = new FileStore(dir, { compactBytes: 0 });
    expect(await flakyRename(2, () => twice.mutate(incrementCounter))).toBe(2);
    expect(counterOf(await good.read())).toBe(2);
    for (const s of [good, bad, twice]) s.close();
  });
});
