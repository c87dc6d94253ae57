// A child process of the wake simulation (test/sim/wakes.test.ts): the process that holds a
// polite loop's runtime, to be SIGKILLed mid-loop.
//   loop-worker <project> <virtual start ms> <wakes> <rest|hang>
// Owns the members `a` and `b` of channel "team" (two polite acknowledgers, 2 s each), starts
// like a real owner (sweep, scan), and prints one JSON line per send and per wake. After <wakes>
// wakes it prints `paused` and waits to be killed: `rest` first lets that wake's commit finish
// (the loop is at rest, the woken agent thinking); `hang` never lets its hand-over return (the
// batch stays in flight under this process: the crash window between drain and commit).
import { World } from './world.ts';

const [dir, start, count, mode] = process.argv.slice(2);
if (!dir || !start || !count || (mode !== 'rest' && mode !== 'hang'))
  throw new Error('usage: loop-worker <project> <start> <wakes> <rest|hang>');

const out = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
const world = new World(dir, Number(start));
const send = world.send.bind(world);
world.send = async (sid, args) => {
  const r = await send(sid, args);
  const d = r.data as { message_ids?: string[]; recipients?: Array<{ session_id: string }> };
  if (r.ok) out({ sent: sid, ids: d.message_ids, to: d.recipients!.map((x) => x.session_id), at: world.t });
  return r;
};
const polite = (sid: string) => () => [
  { after: 2_000, args: { channel: 'team', content: `${sid} noted at ${world.t}` } },
];
world.agents.set('a', polite('a'));
world.agents.set('b', polite('b'));
let n = 0;
const paused = () => {
  out({ paused: true, at: world.t, wakes: n });
  process.stdout.write('paused\n');
};
world.onWake = (w) => {
  out({ wake: w.rid, ids: w.ids, at: w.at, redelivery: w.redelivery });
  if (++n < Number(count)) return;
  world.stopped = true;
  if (mode === 'hang') {
    paused();
    world.handOver = () => new Promise<never>(() => {});
  }
};
world.open();
await world.rt.start();
await world.run({ maxEvents: 1_000 });
if (mode === 'rest') {
  await world.rt.settled();
  paused();
}
await new Promise(() => {});
