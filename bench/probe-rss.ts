// Local probe (not in `npm run bench`): MCP server RSS after N sends, with optional server
// NODE_OPTIONS (PROBE_NODE_OPTIONS), to see how much of it is V8 heap sizing.
import { readFileSync } from 'node:fs';
import { startMcp } from '../test/helpers/mcp-client.ts';
import { withProject } from './lib.ts';

const N = Number(process.argv[2] ?? 3000);
await withProject(async (dir) => {
  const env: Record<string, string> = process.env.PROBE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.PROBE_NODE_OPTIONS } : {};
  const a = await startMcp(dir, { pin: 'sess_rssaaaaaaaaaaaaaaaaaaaa', env });
  const b = await startMcp(dir, { pin: 'sess_rssbbbbbbbbbbbbbbbbbbbb' });
  for (let i = 0; i < 6; i++) {
    await a.call('opencomms_create', { channel: `r${i}`, role: 'A', role_prompt: 'send', rate_limit: 1000 });
    await b.call('opencomms_join', { channel: `r${i}`, role: 'B', role_prompt: 'read' });
  }
  for (let i = 0; i < N; i++) {
    await a.call('opencomms_send', { channel: `r${i % 6}`, content: `m ${i}` });
    if (i % 20 === 19) await b.call('opencomms_pull', { limit: 100 });
  }
  const pid = (a.client.transport as unknown as { pid: number }).pid;
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  console.log(JSON.stringify({ sends: N, node_options: env.NODE_OPTIONS ?? null, rss_mb: Math.round(rss) }));
  await a.close();
  await b.close();
});
