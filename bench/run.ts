// `npm run bench`: every figure as one JSON line {figure, p50, p95, p99, n, ...}.
import { engineBench } from './engine.ts';
import { mcpBench } from './mcp.ts';
import { hooksBench } from './hooks.ts';

const t = performance.now();
await engineBench();
await mcpBench();
await hooksBench();
process.stdout.write(`${JSON.stringify({ figure: 'bench_wall_time', unit: 's', value: Math.round((performance.now() - t) / 100) / 10 })}\n`);
