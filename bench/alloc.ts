// `npm run bench:alloc`: bytes allocated per send, per catch-up line and per pulled message, in
// process (two runtimes on one project, as two MCP servers would be), with V8's sampling heap
// profiler counting objects the GC already collected. Allocation drives the server's scavenges
// (its young generation is 2 MB) and its RSS, and unlike time it barely moves with machine load.
// Prints KB per item for each phase and the functions that allocate most in it.
import type { HeapProfiler } from 'node:inspector';
import { Session } from 'node:inspector/promises';
import { Runtime } from '../src/runtime/runtime.ts';
import { FileStore } from '../src/store/index.ts';
import { caller, message, withProject } from './lib.ts';

const CHANNELS = 12;
/** Rounds before sampling starts: the code is optimized by then, as in a busy server. */
const WARM_ROUNDS = 10;
const ROUNDS = 10;
const BATCH = 100;
const SAMPLE_BYTES = 256;
const TOP = Number(process.env.TOP ?? 12);

/** V8's protocol has the two `include…` flags (garbage counts too); Node's types lack them. */
const SAMPLING: HeapProfiler.StartSamplingParameterType & {
  includeObjectsCollectedByMinorGC: boolean;
  includeObjectsCollectedByMajorGC: boolean;
} = {
  samplingInterval: SAMPLE_BYTES,
  includeObjectsCollectedByMinorGC: true,
  includeObjectsCollectedByMajorGC: true,
};
type Node = HeapProfiler.SamplingHeapProfileNode;

type Phase = 'send' | 'catch-up' | 'pull';

await withProject(async (dir) => {
  const a = new Runtime(new FileStore(dir), { log: () => {} });
  const b = new Runtime(new FileStore(dir), { log: () => {} });
  for (let i = 0; i < CHANNELS; i++) {
    await a.run({
      op: 'create',
      caller: caller(dir, 'a', 'push'),
      args: { channel: `m${i}`, role: 'A', role_prompt: 'send', rate_limit: 1000 },
    });
    await b.run({
      op: 'join',
      caller: caller(dir, 'r', 'pull'),
      args: { channel: `m${i}`, role: 'R', role_prompt: 'read' },
    });
  }
  const session = new Session();
  session.connect();
  const samples = new Map<Phase, Node[]>([
    ['send', []],
    ['catch-up', []],
    ['pull', []],
  ]);
  const sampled = async (phase: Phase, on: boolean, fn: () => Promise<unknown>) => {
    if (on) await session.post('HeapProfiler.startSampling', SAMPLING);
    await fn();
    if (on) samples.get(phase)!.push((await session.post('HeapProfiler.stopSampling')).profile.head);
  };
  for (let k = 0; k < WARM_ROUNDS + ROUNDS; k++) {
    const on = k >= WARM_ROUNDS;
    const channel = `m${k % CHANNELS}`;
    await sampled('send', on, async () => {
      for (let i = 0; i < BATCH; i++) {
        const r = await a.run({ op: 'send', sid: 'a', args: { channel, content: `${message(i)} ${k}` } });
        if (!r.ok) throw new Error(r.message);
      }
    });
    await sampled('catch-up', on, () => b.peek());
    await sampled('pull', on, async () => {
      const r = await b.run({ op: 'pull', sid: 'r', args: { channel, limit: BATCH } });
      if ((r.data as { messages: unknown[] }).messages.length !== BATCH) throw new Error('short pull');
    });
  }
  session.disconnect();

  const items = ROUNDS * BATCH;
  for (const [phase, heads] of samples) {
    const self = new Map<string, number>();
    let total = 0;
    const walk = (n: Node) => {
      const f = n.callFrame;
      const label = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}:${f.lineNumber + 1}`;
      self.set(label, (self.get(label) ?? 0) + n.selfSize);
      total += n.selfSize;
      n.children.forEach(walk);
    };
    heads.forEach(walk);
    const per = phase === 'send' ? 'send' : phase === 'pull' ? 'pulled message' : 'caught-up line';
    console.log(`${phase}: ${(total / items / 1024).toFixed(1)} KB allocated per ${per}`);
    for (const [label, bytes] of [...self].sort((x, y) => y[1] - x[1]).slice(0, TOP))
      console.log(`  ${(bytes / items / 1024).toFixed(2).padStart(6)} KB  ${label}`);
  }
});
