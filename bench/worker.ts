// Bench child: `contend <project> <sender> <reader> <channel> <count> <barrier>` sends <count>
// messages after the barrier, pulling its own mail every 20 sends; prints {sent, pulled}.
import { openRuntime } from '../src/runtime/runtime.ts';
import { waitForBarrier } from './lib.ts';

const [mode, project, sender, reader, channel, count, barrier] = process.argv.slice(2);
if (mode !== 'contend' || !barrier) throw new Error('usage: worker contend <project> <sender> <reader> <channel> <count> <barrier>');
const rt = openRuntime(project!);
process.stdout.write('ready\n');
await waitForBarrier(barrier);
let sent = 0;
let pulled = 0;
const pull = async () => {
  const r = await rt.run({ op: 'pull', sid: reader!, args: { channel, limit: 100 } });
  pulled += ((r.data as { message_ids?: string[] } | undefined)?.message_ids ?? []).length;
};
for (let i = 0; i < Number(count); i++) {
  const r = await rt.run({ op: 'send', sid: sender!, args: { channel, content: `${sender} ${i}` } });
  if (r.ok) sent++;
  else process.stderr.write(`refused: ${r.message}\n`);
  if (i % 20 === 19) await pull();
}
process.stdout.write(`${JSON.stringify({ sent, pulled })}\n`);
await rt.close();
