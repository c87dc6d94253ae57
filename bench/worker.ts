// Bench child: `contend <project> <sender> <reader> <channel> <count> <barrier> [<warm> <sync>]`
// sends <count> messages after the barrier, pulling its own mail every 20 sends; prints {sent,
// pulled, cpu_ms} (the process's CPU time over the timed sends, every thread). With <warm>, it first sends that many to its warm-up channels (`<channel>-warm<k>`,
// read by `<reader>-warm`), says `warm`, and catches up once the parent creates <sync>: the timed
// sends then run on code V8 has finished compiling.
import { openRuntime } from '../src/runtime/runtime.ts';
import { WARM_CHANNELS, waitForBarrier } from './lib.ts';

const [mode, project, sender, reader, channel, count, barrier, warm, sync] = process.argv.slice(2);
if (mode !== 'contend' || !barrier)
  throw new Error('usage: worker contend <project> <sender> <reader> <channel> <count> <barrier> [<warm> <sync>]');
const rt = openRuntime(project!);

/** `n` sends, to `to(i)`, with a pull for `who` every 20; returns what was sent and pulled. */
async function sendAndPull(n: number, to: (i: number) => string, who: string, scope?: string) {
  let sent = 0;
  let pulled = 0;
  for (let i = 0; i < n; i++) {
    const r = await rt.run({ op: 'send', sid: sender!, args: { channel: to(i), content: `${sender} ${i}` } });
    if (r.ok) sent++;
    else process.stderr.write(`refused: ${r.message}\n`);
    if (i % 20 === 19) {
      const p = await rt.run({ op: 'pull', sid: who, args: { channel: scope, limit: 100 } });
      pulled += ((p.data as { message_ids?: string[] } | undefined)?.message_ids ?? []).length;
    }
  }
  return { sent, pulled };
}

if (Number(warm) > 0) {
  await sendAndPull(Number(warm), (i) => `${channel}-warm${i % WARM_CHANNELS}`, `${reader}-warm`);
  process.stdout.write('warm\n');
  await waitForBarrier(sync!);
  await rt.peek(); // the other workers' warm-up lines, applied before the clock starts
}
process.stdout.write('ready\n');
await waitForBarrier(barrier);
const cpu = process.cpuUsage();
const result = await sendAndPull(Number(count), () => channel!, reader!, channel);
const { user, system } = process.cpuUsage(cpu);
process.stdout.write(`${JSON.stringify({ ...result, cpu_ms: (user + system) / 1000 })}\n`);
await rt.close();
