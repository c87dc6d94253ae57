// Crash states beyond kill -9 (test/helpers/crash.ts): the file-system operations of a send, a
// pull and a compaction, and every state a POSIX file system may leave when the power goes at any
// point of them, at both durability levels. Every state loads; at `durable` nothing acknowledged
// is lost; at `default` a kill -9 loses nothing, and what a power loss may lose is counted
// (docs/RELIABILITY.md, "Damage").
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crashStates, filesOf, materialise, recordOps, type CrashState } from '../helpers/crash.ts';
import { Bench, sample } from '../helpers/faults.ts';
import { live, pull, send, type Proc } from '../helpers/mail.ts';
import { FileStore } from '../../src/store/store.ts';
import { resolvePaths } from '../../src/store/paths.ts';

/** Power-loss states checked per operation and level here (`npm run soak -- --faults` checks all). */
const STATES_PER_OPERATION = 40;
const SEED = 7;

let bench: Bench;
beforeAll(() => {
  bench = new Bench();
});
afterAll(async () => {
  await bench.dispose();
}, 60_000);

interface Operation {
  name: string;
  compactBytes?: number;
  /** Compacted just before: the operation's line creates the journal. */
  fresh?: boolean;
  run(p: Proc): Promise<{ acknowledged: string[] }>;
}

/** Contents acknowledged before the operation: one, two (pending). */
const OPERATIONS: Operation[] = [
  { name: 'send', run: async (p) => ({ acknowledged: (await send(p, 'three')).ok ? ['three'] : [] }) },
  { name: 'pull', run: async (p) => ((await pull(p)).result.ok ? { acknowledged: [] } : { acknowledged: [] }) },
  { name: 'compaction', compactBytes: 0, run: async (p) => ({ acknowledged: (await send(p, 'three')).ok ? ['three'] : [] }) },
  { name: 'first line of a journal', fresh: true, run: async (p) => ({ acknowledged: (await send(p, 'three')).ok ? ['three'] : [] }) },
];

/** Contents the project holds: live, or delivered into a history log. */
async function held(dir: string): Promise<string[]> {
  const s = new FileStore(dir);
  try {
    const state = await s.read();
    const out = Object.values(state.messages).map((m) => m.content);
    const folder = resolvePaths(dir).history;
    let names: string[] = [];
    try {
      names = readdirSync(folder);
    } catch {
      // no history yet
    }
    for (const n of names) for (const l of readFileSync(join(folder, n), 'utf8').split('\n')) if (l.startsWith('{') && l.endsWith('}')) out.push((JSON.parse(l) as { content: string }).content);
    return out;
  } finally {
    await s.close();
  }
}

export async function checkCrash(op: Operation, durability: 'default' | 'durable', limit: number) {
  const template = await bench.template(['one', 'two']);
  const dir = bench.copy(template);
  const p = bench.open(dir, { durability, compactBytes: op.compactBytes });
  if (op.fresh) await p.store.compact();
  await live(p);
  const before = filesOf(dir);
  const { value, ops } = await recordOps(dir, () => op.run(p));
  await bench.closeAll();
  const kill = crashStates(before, ops, false);
  const power = crashStates(before, ops, true);
  const losses: string[] = [];
  const broken: string[] = [];
  const check = async (state: CrashState, kind: 'kill' | 'power') => {
    const at = join(bench.root, `crash${Math.random().toString(16).slice(2)}`);
    materialise(state, at);
    const label = `${kind} after ${state.prefix}/${ops.length} ops, lost [${state.lost.map((i) => `${ops[i]!.kind} ${'path' in ops[i]! ? (ops[i] as { path: string }).path : (ops[i] as { to: string }).to}`).join(', ')}]${state.torn ? ', last write torn' : ''}`;
    let got: string[];
    try {
      got = await held(at);
    } catch (e) {
      broken.push(`${label}: does not load (${(e as Error).message})`);
      return;
    }
    const acked = ['one', 'two', ...(state.prefix === ops.length ? value.acknowledged : [])];
    const missing = acked.filter((m) => !got.includes(m));
    if (missing.length) losses.push(`${label}: lost ${missing.join(', ')}`);
  };
  for (const s of kill) await check(s, 'kill');
  const killLosses = losses.length;
  for (const s of sample(power, limit, SEED)) await check(s, 'power');
  return { ops, kill: kill.length, power: power.length, checked: kill.length + Math.min(limit, power.length), killLosses, losses, broken };
}

let states = 0;
describe.each(['default', 'durable'] as const)('crash states at %s durability', (durability) => {
  for (const op of OPERATIONS) {
    it(`${op.name}: every state loads${durability === 'durable' ? ', and nothing acknowledged is lost' : '; a kill -9 loses nothing'}`, async () => {
      const r = await checkCrash(op, durability, STATES_PER_OPERATION);
      states += r.checked;
      expect(r.broken).toEqual([]);
      expect(r.losses.slice(0, r.killLosses)).toEqual([]);
      if (durability === 'durable') expect(r.losses).toEqual([]);
      else console.log(`${op.name} at default: ${r.losses.length - r.killLosses} of ${Math.min(STATES_PER_OPERATION, r.power)} power-loss states lose acknowledged mail${r.losses.length ? `, e.g. ${r.losses[r.killLosses]}` : ''}`);
    }, 60_000);
  }
});

afterAll(() => {
  console.log(`crash states checked: ${states}`);
});
