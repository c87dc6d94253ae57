import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withLock } from '../../src/store/lock.ts';
import type { StorePaths } from '../../src/store/paths.ts';
import { FileStore } from '../../src/store/store.ts';
import { incrementCounter, useTempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let paths: StorePaths;
useTempProject((p) => ({ dir, paths } = p), { ensure: true });

describe('in one process', () => {
  it('nested acquisition is a programming error, not a deadlock', async () => {
    await expect(withLock(paths, () => withLock(paths, async () => 1))).rejects.toThrow(/nested acquisition/);
    // ...and the lock was released afterwards
    expect(await withLock(paths, async () => 2)).toBe(2);
  });

  it('a callback scheduled while holding may lock later', async () => {
    let later!: Promise<number>;
    await withLock(paths, async () => {
      later = new Promise((r) => setTimeout(r, 20)).then(() => withLock(paths, async () => 3));
    });
    expect(await later).toBe(3);
  });

  it('a lock lost while held is recorded, does not crash the process, and blocks the save', async () => {
    const store = new FileStore(dir);
    await expect(
      withLock(paths, async (lock) => {
        await rm(paths.lock); // what a waiter does when it judges us stale
        await new Promise((r) => setTimeout(r, 1300)); // the 1 s refresh notices
        expect(lock.compromised).toBeInstanceOf(Error);
        lock.assertHeld();
      }),
    ).rejects.toThrow(/state lock lost/);
    expect(await store.mutate(incrementCounter)).toBe(1); // and the store still works afterwards
    store.close();
  });

  it('any error other than "held" surfaces at once (ENOTDIR; CI runs as root, where EACCES cannot be provoked)', async () => {
    await writeFile(join(dir, 'afile'), '');
    const t0 = Date.now();
    const bad = { state: join(dir, 'afile', 'state.json'), lock: join(dir, 'afile', '.state.lock') };
    await expect(withLock(bad, async () => 1)).rejects.toMatchObject({ code: 'ENOTDIR' });
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

