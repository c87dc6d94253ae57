// Local probe (not in `npm run bench`): a 100-message pull in-process through the runtime.
import { openRuntime } from '../src/runtime/runtime.ts';
import { setupChannels, stats, withProject } from './lib.ts';
await withProject(async (dir) => {
  const rt = openRuntime(dir);
  await setupChannels(rt, dir, 3);
  const s: number[] = [];
  let k = 0;
  for (let r = 0; r < 15; r++) {
    for (let i = 0; i < 100; i++) await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${k % 3}`, content: `x ${k++}` } });
    const t = performance.now();
    const res = await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
    s.push(performance.now() - t);
    if ((res.data as { messages: unknown[] }).messages.length !== 100) throw new Error('short pull');
  }
  console.log(JSON.stringify(stats(s)));
  await rt.close();
});
