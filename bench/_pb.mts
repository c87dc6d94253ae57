import { Runtime } from '../src/runtime/runtime.ts';
import { FileStore } from '../src/store/index.ts';
import { newCorrelationId, newMessageId } from '../src/protocol/ids.ts';
import { caller, setupChannels, message, stats, withProject } from './lib.ts';
await withProject(async (dir) => {
  const rt = new Runtime(new FileStore(dir));
  await setupChannels(rt, dir, 3);
  for (let i = 0; i < 3; i++) await rt.run({ op: 'join', caller: caller(dir, 'off', 'push'), args: { channel: `bench-${i}`, role: 'Offline', role_prompt: 'away' } });
  const ch = (await rt.read()).channels['bench-0']!;
  const t0 = Date.now();
  await rt.store.mutate((d) => {
    const q = (d.queues.off ??= []);
    for (let i = 0; i < 10000; i++) {
      const id = newMessageId();
      d.messages[id] = { message_id: id, channel_id: ch.id, sender_session_id: 'a', sender_role: 'A', recipient_session_id: 'off', recipient_role: 'Offline', timestamp: t0 + i, message_type: 'manual', content: message(i), reply_to: null, hop_count: 0, correlation_id: newCorrelationId(), root_message_id: null, delivery_status: 'pending', delivered_at: null, attempts: 0, delivery_method: null, in_flight_by: null, in_flight_at: null, transitions: [['SEND', 'pending', t0 + i]] } as never;
      q.push(id);
    }
    return { changed: true, result: null };
  });
  const xs: number[] = [];
  for (let i = 0; i < 600; i++) {
    const t = performance.now();
    await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${i % 3}`, content: message(i), broadcast: true } });
    xs.push(performance.now() - t);
    if (i % 20 === 19) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
  }
  console.log(JSON.stringify(stats(xs.slice(100))));
  await rt.close();
});
