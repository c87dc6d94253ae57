// Issue 8, fix-first item 8: a writer whose lock was broken notices before it writes (not on its
// next refresh), and every state is validated before it is saved, in production too.
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withLock } from '../../src/store/file/lock.ts';
import type { StorePaths } from '../../src/store/paths.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { counterOf, incrementCounter, useTempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let paths: StorePaths;
useTempProject((p) => ({ dir, paths } = p), { ensure: true });

/** What a waiter that judged us stale does: remove our lock and take its own. */
const takeOver = () => {
  unlinkSync(paths.lock);
  closeSync(openSync(paths.lock, 'wx'));
};

describe('a broken lock is noticed before the write', () => {
  it('assertHeld throws at once after another process took the lock over (no refresh needed)', async () => {
    await expect(
      withLock(paths, async (lock) => {
        lock.assertHeld(); // ours
        takeOver();
        const t0 = performance.now();
        expect(() => lock.assertHeld()).toThrow(/state lock lost \(another process holds it now\)/);
        expect(performance.now() - t0).toBeLessThan(50);
        lock.assertHeld();
      }),
    ).rejects.toThrow(/state lock lost/);
    // The new holder's lock was left alone on release.
    expect(statSync(paths.lock).isFile()).toBe(true);
    unlinkSync(paths.lock);
  });

  it('a mutation whose lock is taken over mid-step saves nothing', async () => {
    const store = new FileStore(dir);
    expect(await store.mutate(incrementCounter)).toBe(1);
    const before = readFileSync(paths.state, 'utf8');
    await expect(
      store.mutate((draft) => {
        takeOver(); // another process broke our lock while the engine ran
        return incrementCounter(draft);
      }),
    ).rejects.toThrow(/state lock lost/);
    expect(readFileSync(paths.state, 'utf8')).toBe(before);
    unlinkSync(paths.lock);
    expect(counterOf(await new FileStore(dir).read())).toBe(1);
    await store.close();
  });

  it('a removed lock (gone, not taken) is noticed the same way', async () => {
    await expect(
      withLock(paths, async (lock) => {
        unlinkSync(paths.lock);
        lock.assertHeld();
      }),
    ).rejects.toThrow(/the lock file is gone/);
  });
});

describe('every save is validated, in production too', () => {
  it('outside vitest (no VITEST, no OPENCOMMS_VALIDATE_SAVE) an invalid state is refused and nothing is written', () => {
    const script = `
      import { FileStore } from ${JSON.stringify(join(import.meta.dirname, '../../src/store/file/store.ts'))};
      const store = new FileStore(${JSON.stringify(dir)});
      await store.mutate((d) => { d.errors = [{ at: 0, message: 'valid' }]; return { changed: true, result: 1 }; });
      try {
        await store.mutate((d) => {
          d.channels.bad = { id: 'chn_x', name: 'other-name', project_id: 'p', worktree: '/w', members: [] }; // key ≠ name
          return { changed: true, result: 2 };
        });
        console.log('saved');
      } catch (e) { console.log('refused: ' + e.message); }
    `;
    const env = { ...process.env };
    delete env.VITEST;
    delete env.OPENCOMMS_VALIDATE_SAVE;
    for (const k of Object.keys(env)) if (k.startsWith('VITEST')) delete env[k];
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      env,
      encoding: 'utf8',
    });
    expect(out.trim()).toMatch(/^refused: refusing to save an invalid state/);
    expect(JSON.parse(readFileSync(paths.state, 'utf8')).channels).toEqual({});
  });
});
