// `npm run bench`: every figure as one JSON line {figure, ..., target}; ratios carry the floor
// they are divided by, measured in the same run. `npm run bench -- engine`, `-- mcp`, `-- hooks`, `-- operator`,
// `-- postgres` or `-- machines` runs one part; `-- postgres <part>` one part of that (bench/postgres.ts PARTS).
import { engineBench } from './engine.ts';
import { mcpBench } from './mcp.ts';
import { hooksBench } from './hooks.ts';
import { operatorBench } from './operator.ts';
import { machinesBench } from './machines.ts';
import { postgresBench } from './postgres.ts';

const only = process.argv[2];
const t = performance.now();
if (!only || only === 'engine') await engineBench();
if (!only || only === 'mcp') await mcpBench();
if (!only || only === 'hooks') await hooksBench();
if (!only || only === 'operator') await operatorBench();
if (!only || only === 'postgres') await postgresBench(process.argv[3]);
if (!only || only === 'machines') await machinesBench();
process.stdout.write(
  `${JSON.stringify({ figure: 'bench_wall_time', unit: 's', value: Math.round((performance.now() - t) / 100) / 10 })}\n`,
);
