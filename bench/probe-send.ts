import { resolvePaths } from '../src/store/index.ts';
// Local probe (not in `npm run bench`): in-process send latency on a small steady state.
import { openRuntime } from '../src/runtime/runtime.ts';
import { setupChannels, stats, withProject } from './lib.ts';
await withProject(async (dir) => {
  const rt = openRuntime(dir);
  await setupChannels(rt, dir, 2);
  const s: number[] = [];
  let cpu = process.cpuUsage();
  for (let i = 0; i < 1100; i++) {
    if (i === 100) cpu = process.cpuUsage();
    const t = performance.now();
    await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${i % 2}`, content: `x ${i}` } });
    s.push(performance.now() - t);
    if (i % 20 === 19) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
  }
  const used = process.cpuUsage(cpu);
  console.log(`cpu per op (user+system, incl. one pull per 20 sends): ${((used.user + used.system) / 1000 / 1000).toFixed(3)} ms`);
  console.log(JSON.stringify(stats(s.slice(100))), 'state bytes', (await import('node:fs')).statSync(resolvePaths(rt.store.location).state).size);
  await rt.close();
});
