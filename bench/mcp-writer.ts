// Bench child: `mcp-writer <project> <tag> <count> <barrier> [<floor server> [<its mode>]]`: its own
// `opencomms mcp` server, a channel of its own with a reader that joined and left, then <count>
// sends one at a time after the barrier; prints {sent, ms} (each send's round trip). With a floor server (bench/floor-server.ts,
// bundled), the same sends to that server instead, which appends each to a file of the project
// (with `--pg`, inserts each into its table).
import { join } from 'node:path';
import { ROOT, mcpNodeFlags, connectMcp, message, waitForBarrier } from './lib.ts';

const [project, tag, count, barrier, floor, floorMode] = process.argv.slice(2);
if (!barrier) throw new Error('usage: mcp-writer <project> <tag> <count> <barrier> [<floor server> [<its mode>]]');
const pin = (who: string) =>
  `sess_${`${tag}${who}`
    .replace(/[^A-Za-z0-9]/g, '')
    .padEnd(24, '0')
    .slice(0, 24)}`;
const channel = `c-${tag}`.toLowerCase();
const a = floor ? await connectMcp([floor, project!, ...(floorMode ? [floorMode] : [])]) : await ours();
const tool = floor ? 'send' : 'opencomms_send';

async function ours() {
  const server = [...mcpNodeFlags, join(ROOT, 'dist', 'opencomms-mcp.mjs'), project!];
  const writer = await connectMcp(server, { OPENCOMMS_MEMBER_ID: pin('a') });
  const reader = await connectMcp(server, { OPENCOMMS_MEMBER_ID: pin('b') });
  await writer.call('opencomms_create', { channel, role: 'Writer', role_prompt: 'send', rate_limit: 1000 });
  await reader.call('opencomms_join', { channel, role: 'Reader', role_prompt: 'read' });
  await reader.close();
  return writer;
}
process.stdout.write('ready\n');
await waitForBarrier(barrier);
let sent = 0;
const ms: number[] = [];
for (let i = 0; i < Number(count); i++) {
  const t = performance.now();
  const r = await a.call(tool, { channel, content: message(i) });
  ms.push(Math.round((performance.now() - t) * 1000) / 1000);
  if (r.ok) sent++;
  else process.stderr.write(`refused: ${r.message}\n`);
}
process.stdout.write(`${JSON.stringify({ sent, ms })}\n`);
await a.close();
