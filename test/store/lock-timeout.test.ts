import { access } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { RefusalError } from '../../src/protocol/result.ts';
import type { StorePaths } from '../../src/store/paths.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { incrementCounter, spawnWorker, useTempProject } from '../helpers/store-fixtures.ts';
import type { Worker } from '../helpers/store-fixtures.ts';

let dir: string;
let paths: StorePaths;
const workers: Worker[] = [];
useTempProject((p) => ({ dir, paths } = p), { ensure: true, workers });

describe('lock timeout', () => {
  it('a live holder for more than 5 s → state_busy after ~5 s, file untouched', async () => {
    const w = spawnWorker('hold', dir);
    workers.push(w);
    await w.line('locked');
    const store = new FileStore(dir);
    const t0 = performance.now();
    const e = await store.mutate(incrementCounter).then(
      () => null,
      (err: unknown) => err,
    );
    const waited = performance.now() - t0;
    expect(e).toBeInstanceOf(RefusalError);
    expect((e as RefusalError).refusal.data!.reason).toBe('state_busy');
    expect((e as RefusalError).message).toMatch(/within 5000 ms/);
    expect(waited).toBeGreaterThanOrEqual(4990);
    expect(waited).toBeLessThan(5600);
    await expect(access(paths.state)).rejects.toThrow(/ENOENT/);
    store.close();
  }, 20_000);
});

describe('in-process waiters share the deadline', () => {
  it('queued callers all time out at ~5 s behind a foreign holder, not 5 s each', async () => {
    const w = spawnWorker('hold', dir);
    workers.push(w);
    await w.line('locked');
    const t0 = performance.now();
    const results = await Promise.allSettled([1, 2, 3].map(() => new FileStore(dir).mutate(incrementCounter)));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(performance.now() - t0).toBeLessThan(5600);
  }, 20_000);
});
