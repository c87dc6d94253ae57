import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { FileStore } from '../../src/store/file/store.ts';
import { counterOf, incrementCounter, spawnWorker, useTempProject } from '../helpers/store-fixtures.ts';
import type { Worker } from '../helpers/store-fixtures.ts';

let dir: string;
const workers: Worker[] = [];
useTempProject((p) => ({ dir } = p), { ensure: true, workers });

describe('across processes', () => {
  it('4 processes × 250 locked increments → exactly 1000', async () => {
    const barrier = join(dir, 'go');
    const ws = Array.from({ length: 4 }, () => spawnWorker('increment', dir, '250', barrier));
    workers.push(...ws);
    await Promise.all(ws.map((w) => w.line('ready')));
    await writeFile(barrier, '');
    const t0 = performance.now();
    await Promise.all(ws.map((w) => w.line('done')));
    expect(await Promise.all(ws.map((w) => w.exited))).toEqual([0, 0, 0, 0]);
    console.log(`4×250 contended increments: ${Math.round(performance.now() - t0)} ms`);
    const store = new FileStore(dir);
    expect(counterOf(await store.read())).toBe(1000);
    store.close();
  }, 30_000);

  it('a SIGKILLed lock holder stalls the next mutate for less than 5 s', async () => {
    const w = spawnWorker('hold', dir);
    workers.push(w);
    await w.line('locked');
    w.child.kill('SIGKILL');
    await w.exited;
    const store = new FileStore(dir);
    const t0 = performance.now();
    expect(await store.mutate(incrementCounter)).toBe(1);
    const waited = performance.now() - t0;
    expect(waited).toBeLessThan(5000);
    expect(waited).toBeGreaterThan(500); // it did wait for the stale window: the lock was really held
    store.close();
  }, 20_000);

  it('a waiter watches the lock only while it waits: after the release, no watch of it is left', async () => {
    const release = join(dir, 'release');
    const w = spawnWorker('hold-until', dir, release);
    workers.push(w);
    await w.line('locked');
    const before = inotifyWatches();
    const store = new FileStore(dir);
    const done = store.mutate(incrementCounter);
    // Waiting: one watch more than before (on the lock), however many times the wait is renewed.
    await vi.waitFor(() => expect(inotifyWatches()).toBe(before + 1), { timeout: 5_000, interval: 5 });
    await writeFile(release, '');
    expect(await done).toBe(1);
    expect(await w.exited).toBe(0);
    // A watch kept after the wait would wake this process on every other writer's lock.
    expect(inotifyWatches()).toBe(before);
    store.close();
  }, 20_000);
});

/** Inotify watches this process holds (Linux: the `inotify wd:` lines of its inotify descriptors). */
function inotifyWatches(): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // closed meanwhile (the readdir's own descriptor)
    }
    if (target === 'anon_inode:inotify')
      n += readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('inotify wd:')).length;
  }
  return n;
}
