// `npm run bench:profile -- send|pull [postgres]`: one MCP server profiled (--cpu-prof) under the
// bench's workload (with `postgres`, on a project bound to OPENCOMMS_BENCH_DATABASE_URL or the
// machine's server at 127.0.0.1:5432 database `test`), run from the sources so frames carry their file names; prints where its time went.
// docs/performance.md quotes these tables.
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { writeBinding } from '../src/store/binding.ts';
import { ROOT, mcpNodeFlags, connectMcp, message, withProject } from './lib.ts';

const SENDS = 3000;
/** The bench's housekeeping: the reader drains every 20 sends, so queues stay short. */
const DRAIN_EVERY = 20;
const PULL_ROUNDS = 40;
const CHANNELS = 12;
const TOP = Number(process.env.TOP ?? 25);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

/** Self and inclusive milliseconds per function (file-qualified), from a .cpuprofile. */
function summarise(profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (n: ProfileNode) =>
    `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').pop() ?? ''}`.trim();
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    total += us;
    const own = label(byId.get(id)!);
    self.set(own, (self.get(own) ?? 0) + us);
    const seen = new Set<string>();
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) {
      const l = label(byId.get(x)!);
      if (seen.has(l)) continue;
      inclusive.set(l, (inclusive.get(l) ?? 0) + us);
      seen.add(l);
    }
  });
  const table = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(
        ([k, us]) => `${(us / 1000).toFixed(1).padStart(9)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`,
      );
  return { self: table(self), inclusive: table(inclusive) };
}

const mode = process.argv[2] === 'pull' ? 'pull' : 'send';
const out = join(ROOT, '.bench-profile', mode);
await rm(out, { recursive: true, force: true });
const server = (profiled: boolean) => [
  ...mcpNodeFlags,
  ...(profiled ? ['--cpu-prof', `--cpu-prof-dir=${out}`] : []),
  '--import',
  'tsx',
  join(ROOT, 'adapters', 'mcp', 'main.ts'),
];

const pgUrl = process.env.OPENCOMMS_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const pgKey = process.argv[3] === 'postgres' ? `bench_${randomBytes(5).toString('hex')}` : null;
await withProject(async (dir) => {
  if (pgKey) await writeBinding(dir, pgUrl, pgKey);
  const a = await connectMcp([...server(mode === 'send'), dir], {
    OPENCOMMS_MEMBER_ID: 'sess_benchaaaaaaaaaaaaaaaaaa',
  });
  const b = await connectMcp([...server(mode === 'pull'), dir], {
    OPENCOMMS_MEMBER_ID: 'sess_benchbbbbbbbbbbbbbbbbbb',
  });
  for (let c = 0; c < CHANNELS; c++) {
    await a.call('opencomms_create', { channel: `m${c}`, role: 'A', role_prompt: 'send', rate_limit: 1000 });
    await b.call('opencomms_join', { channel: `m${c}`, role: 'B', role_prompt: 'read' });
  }
  const send = async (channel: string, content: string) => {
    const r = await a.call('opencomms_send', { channel, content });
    if (!r.ok) throw new Error(r.message);
  };
  if (mode === 'send') {
    for (let i = 0; i < SENDS; i++) {
      await send(`m${i % CHANNELS}`, message(i));
      if (i % DRAIN_EVERY === DRAIN_EVERY - 1) await b.call('opencomms_pull', { limit: 100 });
    }
  } else {
    for (let k = 0; k < PULL_ROUNDS; k++) {
      for (let i = 0; i < 100; i++) await send(`m${k % CHANNELS}`, `${message(i)} ${k}`);
      const r = await b.call('opencomms_pull', { channel: `m${k % CHANNELS}`, limit: 100 });
      if (r.data.messages.length !== 100) throw new Error(`pull returned ${r.data.messages.length}`);
    }
  }
  await a.close();
  await b.close();
});

if (pgKey) {
  const admin = new pg.Client(pgUrl);
  await admin.connect();
  await admin.query(`drop schema if exists "oc_${pgKey}" cascade`);
  await admin.end();
}

const [file] = await readdir(out);
const { self, inclusive } = summarise(JSON.parse(await readFile(join(out, file!), 'utf8')));
const calls =
  mode === 'send'
    ? `${SENDS} sends + ${SENDS / DRAIN_EVERY} drains`
    : `${PULL_ROUNDS} pulls of 100 (+ ${PULL_ROUNDS * 100} sends by the other server)`;
console.log(`profile of the ${mode === 'send' ? 'sending' : 'pulling'} server: ${calls}; ${join(out, file!)}`);
console.log(`--- self\n${self.join('\n')}`);
console.log(`--- inclusive\n${inclusive.join('\n')}`);
