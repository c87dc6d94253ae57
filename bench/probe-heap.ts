// Local probe (not in `npm run bench`): heap after GC across many in-process sends (run with
// node --expose-gc --import tsx), to tell a leak from heap sizing.
import { openRuntime } from '../src/runtime/runtime.ts';
import { setupChannels, withProject } from './lib.ts';

const gc = (globalThis as { gc?: () => void }).gc;
await withProject(async (dir) => {
  const rt = openRuntime(dir);
  await setupChannels(rt, dir, 6);
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < 2000; i++) {
      await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${i % 6}`, content: `x ${round} ${i}` } });
      if (i % 20 === 19) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
    }
    gc?.();
    console.log(`after ${(round + 1) * 2000} sends: ${JSON.stringify(Object.fromEntries(Object.entries(process.memoryUsage()).map(([k, v]) => [k, Math.round(v / 1e6)])))}`);
  }
  await rt.close();
});
