// Every file-system call of the write path made to fail in turn (test/helpers/faults.ts): a short
// write, a disk that fills mid-write, ENOSPC, EIO, EROFS, a failed fsync, a failed rename, at
// every position of a send, a pull, a compaction, two recoveries and a save, at both durability
// levels; and the journal cut at byte offsets of its last line under processes that hold its old
// length. Bounded and seeded here; `npm run soak -- --faults` runs every point.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Bench, faultPoints, lastLine, runCut, runPoint, sample, SCENARIOS } from '../helpers/faults.ts';
import { send } from '../helpers/mail.ts';

/** Fault points run per scenario and level here (the soak runs them all). */
const POINTS_PER_SCENARIO = 12;
/** Cut offsets of the journal's last line tried here (the soak tries every byte). */
const CUT_OFFSETS = 8;
const SEED = 2026;

let bench: Bench;
beforeAll(() => {
  bench = new Bench();
});
afterAll(async () => {
  await bench.dispose();
}, 60_000);

let covered = 0;
let found = 0;

describe.each(['default', 'durable'] as const)('faults at %s durability', (durability) => {
  for (const s of SCENARIOS) {
    it(`${s.name}: every fault point leaves the project consistent`, async () => {
      const scenario = { ...s, options: { ...s.options, durability } };
      const template = await bench.template(s.pending, s.setup);
      const points = await faultPoints(bench, scenario, template);
      expect(points.length).toBeGreaterThan(0);
      found += points.length;
      const failures: string[] = [];
      for (const point of sample(points, POINTS_PER_SCENARIO, SEED)) {
        const wrong = await runPoint(bench, scenario, template, point);
        covered++;
        if (wrong)
          failures.push(
            `${point.kind} at call ${point.at} (${point.call.op} ${point.call.path.replace(/.*\.opencomms\//, '')}): ${wrong}`,
          );
      }
      expect(failures).toEqual([]);
    }, 60_000);
  }
});

it('a journal cut at any byte of its last line strands nothing written after the cut', async () => {
  const template = await bench.template(['one', 'two'], async (p) => {
    expect((await send(p, 'three')).ok).toBe(true);
  });
  const { start, end } = lastLine(template);
  const offsets = [
    start,
    start + 1,
    end - 12,
    end - 1,
    ...sample(
      [...Array(end - start).keys()].map((i) => start + i),
      CUT_OFFSETS,
      SEED,
    ),
  ];
  const failures: string[] = [];
  for (const at of new Set(offsets)) {
    const wrong = await runCut(bench, template, at);
    if (wrong) failures.push(wrong);
  }
  expect(failures).toEqual([]);
}, 60_000);

afterAll(() => {
  console.log(`fault points: ${covered} run of ${found} found (operation × call × fault, both durability levels)`);
});
