// Local probe (not in `npm run bench`): what one locked save costs, piece by piece.
import { resolvePaths } from '../src/store/index.ts';
import { readFileSync } from 'node:fs';
import { openRuntime } from '../src/runtime/runtime.ts';
import { withLock, writeAtomic } from '../src/store/index.ts';
import { setupChannels, stats, withProject } from './lib.ts';

const time = async (n: number, fn: () => unknown) => {
  const s: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    s.push(performance.now() - t);
  }
  return stats(s).p50;
};
await withProject(async (dir) => {
  const rt = openRuntime(dir);
  await setupChannels(rt, dir, 2);
  for (let i = 0; i < 300; i++) {
    await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${i % 2}`, content: `x ${i}` } });
    if (i % 20 === 19) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
  }
  const text = readFileSync(resolvePaths(rt.store.location).state, 'utf8');
  const obj = JSON.parse(text);
  const out = {
    lock_unlock: await time(500, () => withLock(resolvePaths(rt.store.location), async () => {})),
    atomic_write: await time(500, () => writeAtomic(`${resolvePaths(rt.store.location).dir}/probe.json`, text, { tmpPrefix: '.probe' })),
    clone: await time(500, () => structuredClone(obj)),
    stringify: await time(500, () => JSON.stringify(obj, null, 2)),
    noop_mutate: await time(500, () => rt.store.mutate(() => ({ changed: false, result: null }))),
    changed_mutate: await time(500, () => rt.store.mutate(() => ({ changed: true, result: null }))),
  };
  console.log(JSON.stringify(out), 'bytes', text.length);
  await rt.close();
});
