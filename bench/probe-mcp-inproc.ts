// Local probe (not in `npm run bench`): the MCP server in-process over the SDK's in-memory
// transport, to see what the server adds to a send (profile with --cpu-prof).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { buildServer } from '../adapters/mcp/server.ts';
import { openRuntime } from '../src/runtime/runtime.ts';
import { stats, withProject } from './lib.ts';

await withProject(async (dir) => {
  const rt = openRuntime(dir);
  const server = buildServer(rt, { host: 'mcp', admin: false, pin: 'sess_a', project: dir, projectId: 'local-project' });
  const [ct, st] = InMemoryTransport.createLinkedPair();
  await server.connect(st);
  const client = new Client({ name: 'probe', version: '0' });
  await client.connect(ct);
  const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });
  await call('opencomms_create', { channel: 'p', role: 'A', role_prompt: 'x', rate_limit: 1000 });
  await rt.run({ op: 'join', caller: { session_id: 'sess_b', host: 'x', surface: 'mcp', delivery_mode: 'pull', host_session_id: null, project_id: 'local-project', worktree: dir }, args: { channel: 'p', role: 'B', role_prompt: 'y' } });
  const s: number[] = [];
  for (let i = 0; i < 900; i++) {
    const t = performance.now();
    await call('opencomms_send', { channel: 'p', content: `m ${i}` });
    s.push(performance.now() - t);
    if (i % 20 === 19) await rt.run({ op: 'pull', sid: 'sess_b', args: { limit: 100 } });
  }
  console.log(JSON.stringify(stats(s.slice(100))));
  await client.close();
  await rt.close();
});
