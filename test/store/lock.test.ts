import { spawnSync } from 'node:child_process';
import { existsSync, linkSync, readdirSync, statSync, unlinkSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { LOCK_STALE_MS } from '../../src/protocol/limits.ts';
import { withLock } from '../../src/store/file/lock.ts';
import type { StorePaths } from '../../src/store/paths.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { incrementCounter, useTempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let paths: StorePaths;
useTempProject((p) => ({ dir, paths } = p), { ensure: true });

describe('in one process', () => {
  it('nested acquisition fails at its deadline, not a deadlock', async () => {
    const t = performance.now();
    await expect(withLock(paths, () => withLock(paths, async () => 1, { timeoutMs: 300 }))).rejects.toMatchObject({
      refusal: { data: { reason: 'state_busy' } },
    });
    expect(performance.now() - t).toBeGreaterThanOrEqual(290);
    // ...and the lock was released afterwards
    expect(await withLock(paths, async () => 2)).toBe(2);
  });

  it('a waiter queued behind a stuck holder of this process fails at its deadline; the queue goes on', async () => {
    let release!: () => void;
    const holder = withLock(paths, () => new Promise<number>((r) => (release = () => r(1))));
    const waiter = withLock(paths, async () => 2, { timeoutMs: 200 });
    const after = withLock(paths, async () => 3);
    await expect(waiter).rejects.toMatchObject({ refusal: { data: { reason: 'state_busy' } } });
    release();
    expect(await Promise.all([holder, after])).toEqual([1, 3]);
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
    const t0 = performance.now();
    const bad = { state: join(dir, 'afile', 'state.json'), lock: join(dir, 'afile', '.state.lock') };
    await expect(withLock(bad, async () => 1)).rejects.toMatchObject({ code: 'ENOTDIR' });
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});

describe('waiting for another process', () => {
  it('whileBusy runs each time the lock is found held, before the wait; what it throws is ignored', async () => {
    const foreign = join(paths.dir, '.held-elsewhere');
    await writeFile(foreign, '');
    linkSync(foreign, paths.lock);
    let calls = 0;
    let ran = false;
    const held = withLock(paths, async () => (ran = true), {
      whileBusy: () => {
        calls++;
        throw new Error('a failed catch-up');
      },
    });
    await new Promise((r) => setTimeout(r, 100)); // ten LOCK_RETRY_MAX_MS: woken again, and again
    expect(ran).toBe(false);
    expect(calls).toBeGreaterThanOrEqual(2);
    unlinkSync(paths.lock);
    expect(await held).toBe(true);
    const after = calls;
    await withLock(paths, async () => {}, { whileBusy: () => calls++ }); // free: never called
    expect(calls).toBe(after);
  });

  it('the deadline is monotonic: a wall clock stepped back a minute mid-wait does not stretch it', async () => {
    const foreign = join(paths.dir, '.held-elsewhere');
    await writeFile(foreign, '');
    linkSync(foreign, paths.lock);
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    try {
      const t0 = performance.now();
      let stepped = false;
      const waiting = withLock(paths, async () => 1, {
        timeoutMs: 300,
        whileBusy: () => {
          if (!stepped) vi.setSystemTime(Date.now() - 60_000);
          stepped = true;
        },
      });
      await expect(waiting).rejects.toMatchObject({ refusal: { data: { reason: 'state_busy' } } });
      expect(performance.now() - t0).toBeLessThan(2000);
    } finally {
      vi.useRealTimers();
      unlinkSync(paths.lock);
    }
  });
});

describe('the lock is a link to this process token', () => {
  const tokensIn = (d: string) => readdirSync(d).filter((n) => /^\.state-lock\.\d+\.[0-9a-f]{8}\.tmp$/.test(n));

  it('one token per process, linked for each hold: the lock is the same inode every time', async () => {
    const inodes = new Set<number>();
    for (let i = 0; i < 3; i++)
      await withLock(paths, async (lock) => {
        lock.assertHeld(); // a write: a writer keeps its token
        inodes.add(statSync(paths.lock).ino);
      });
    expect(inodes.size).toBe(1);
    const mine = tokensIn(paths.dir).filter((n) => n.startsWith(`.state-lock.${process.pid}.`));
    expect(mine).toHaveLength(1);
    expect(statSync(join(paths.dir, mine[0]!)).ino).toBe([...inodes][0]);
    expect(existsSync(paths.lock)).toBe(false); // released: the token stays, the lock name goes
  });

  it('a hold that writes nothing leaves no file', async () => {
    await withLock(paths, async () => {});
    expect(tokensIn(paths.dir)).toEqual([]);
    expect(existsSync(paths.lock)).toBe(false);
  });

  it('a new hold never looks stale, however long the token sat unused', async () => {
    await withLock(paths, async (lock) => lock.assertHeld());
    // Ten stale windows later (the clock moved on; the token was not touched meanwhile).
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 10 * LOCK_STALE_MS);
      await withLock(paths, async () => {
        expect(Date.now() - statSync(paths.lock).mtimeMs).toBeLessThan(LOCK_STALE_MS / 3);
      });
    } finally {
      vi.useRealTimers();
    }
  });

  it('a token removed by hand is made again', async () => {
    await withLock(paths, async (lock) => lock.assertHeld());
    for (const n of tokensIn(paths.dir)) unlinkSync(join(paths.dir, n));
    expect(
      await withLock(paths, async (lock) => {
        lock.assertHeld();
        return 'held';
      }),
    ).toBe('held');
    expect(tokensIn(paths.dir).filter((n) => n.startsWith(`.state-lock.${process.pid}.`))).toHaveLength(1);
  });

  it("a process's token goes when it exits, and a killed process's token when the next process makes its own", () => {
    const script = (kill: boolean) =>
      `import { withLock } from ${JSON.stringify(join(import.meta.dirname, '../../src/store/file/lock.ts'))};
       await withLock(${JSON.stringify(paths)}, async (lock) => lock.assertHeld());
       ${kill ? "process.kill(process.pid, 'SIGKILL');" : ''}`;
    const run = (kill: boolean) =>
      spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script(kill)]);
    run(false);
    expect(tokensIn(paths.dir)).toEqual([]);
    run(true);
    const left = tokensIn(paths.dir);
    expect(left).toHaveLength(1); // killed: no exit handler ran
    run(false); // the next process sweeps it
    expect(tokensIn(paths.dir)).toEqual([]);
  });
});
