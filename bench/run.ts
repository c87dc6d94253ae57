// `npm run bench`: every figure as one JSON line {figure, ..., target}; ratios carry the floor
// they are divided by, measured in the same run. `npm run bench -- engine`, `-- mcp`, `-- hooks`, `-- operator`, `-- wakes`,
// `-- postgres` or `-- machines` runs one part; `-- postgres <part>` one part of that (bench/postgres.ts PARTS).
// A part that fails (a loaded computer, a server gone) prints one line saying what it could not
// measure and why, and the parts after it still run; the exit code is then 1.
import { engineBench } from './engine.ts';
import { mcpBench } from './mcp.ts';
import { hooksBench } from './hooks.ts';
import { operatorBench } from './operator.ts';
import { machinesBench } from './machines.ts';
import { postgresBench } from './postgres.ts';
import { wakesBench } from './wakes.ts';
import { scaleBench } from './scale.ts';

const PARTS: ReadonlyArray<readonly [string, () => Promise<unknown>]> = [
  ['engine', engineBench],
  ['mcp', mcpBench],
  ['hooks', hooksBench],
  ['operator', operatorBench],
  ['postgres', () => postgresBench(process.argv[3])],
  ['machines', machinesBench],
  ['wakes', wakesBench],
  ['scale', scaleBench],
];

const line = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);
const only = process.argv[2];
const t = performance.now();
let failed = 0;
for (const [name, run] of PARTS) {
  if (only && only !== name) continue;
  try {
    await run();
  } catch (e) {
    failed++;
    const reason = String((e as Error)?.message ?? e).split('\n')[0];
    line({ figure: `bench_part_${name}`, measured: false, reason, note: 'the figures of this part not printed above' });
  }
}
line({ figure: 'bench_wall_time', unit: 's', value: Math.round((performance.now() - t) / 100) / 10 });
if (failed) process.exitCode = 1;
