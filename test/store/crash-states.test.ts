// Crash states beyond kill -9 (test/helpers/crash.ts): the file-system operations of a send, a
// pull and a compaction, and every state a POSIX file system may leave when the power goes at any
// point of them, at both durability levels. Every state loads; at `durable` nothing acknowledged
// is lost; at `default` a kill -9 loses nothing, and what a power loss may lose is counted
// (docs/reliability.md, "Damage").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCrash, CRASH_OPERATIONS } from '../helpers/crash.ts';
import { Bench } from '../helpers/faults.ts';

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

let states = 0;
describe.each(['default', 'durable'] as const)('crash states at %s durability', (durability) => {
  for (const op of CRASH_OPERATIONS) {
    it(`${op.name}: every state loads${durability === 'durable' ? ', and nothing acknowledged is lost' : '; a kill -9 loses nothing'}`, async () => {
      const r = await checkCrash(bench, op, durability, STATES_PER_OPERATION, SEED);
      states += r.checked;
      expect(r.broken).toEqual([]);
      expect(r.losses.slice(0, r.killLosses)).toEqual([]);
      if (durability === 'durable') expect(r.losses).toEqual([]);
      else
        console.log(
          `${op.name} at default: ${r.losses.length - r.killLosses} of ${Math.min(STATES_PER_OPERATION, r.power)} power-loss states lose acknowledged mail${r.losses.length ? `, e.g. ${r.losses[r.killLosses]}` : ''}`,
        );
    }, 60_000);
  }
});

afterAll(() => {
  console.log(`crash states checked: ${states}`);
});
