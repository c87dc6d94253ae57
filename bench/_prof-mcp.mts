import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const dir = mkdtempSync(join(tmpdir(), 'pm-'));
const bin = '/work/main/bin/opencomms.js';
async function start(pin: string, prof: boolean) {
  const args = [...(prof ? ['--cpu-prof', '--cpu-prof-dir=/tmp/mcpprof'] : []), bin, 'mcp', '--project', dir];
  const t = new StdioClientTransport({ command: process.execPath, args, env: { ...process.env, OPENCOMMS_MEMBER_ID: pin } as Record<string,string>, stderr: 'ignore' });
  const c = new Client({ name: 'p', version: '0' });
  await c.connect(t);
  return { c, call: async (name: string, a: object) => JSON.parse(((await c.callTool({ name, arguments: a as Record<string, unknown> })) as any).content[0].text) };
}
const A = await start('sess_profaaaaaaaaaaaaaaaaaaa', process.argv[2] === 'prof');
const B = await start('sess_profbbbbbbbbbbbbbbbbbbb', false);
for (let i = 0; i < 12; i++) {
  await A.call('opencomms_create', { channel: `m${i}`, role: 'A', role_prompt: 'p', rate_limit: 1000 });
  await B.call('opencomms_join', { channel: `m${i}`, role: 'B', role_prompt: 'p' });
}
const N = Number(process.argv[3] ?? 2000);
const times: number[] = [];
for (let i = 0; i < N; i++) {
  const t = performance.now();
  const r = await A.call('opencomms_send', { channel: `m${i % 12}`, content: `message ${i} `.padEnd(200, 'x') });
  times.push(performance.now() - t);
  if (!r.ok) throw new Error(r.message);
  if (i % 20 === 19) await B.call('opencomms_pull', { limit: 100 });
}
times.sort((a, b) => a - b);
console.log('send p50', times[N >> 1].toFixed(3), 'p95', times[Math.floor(N * 0.95)].toFixed(3));
await A.c.close(); await B.c.close();
