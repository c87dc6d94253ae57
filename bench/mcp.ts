// MCP figures (issue "MCP server"): SDK client → `opencomms mcp` over real stdio → persisted →
// result; a 100-message pull; sustained sends/s with one call in flight; server RSS after 10k sends.
import { readFile } from 'node:fs/promises';
import { startMcp } from '../test/helpers/mcp-client.ts';
import { emit, now, stats, withProject } from './lib.ts';

const CHANNELS = 12;

async function rssMb(pid: number) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 102.4) / 10;
}

export async function mcpBench() {
  await withProject(async (dir) => {
    const a = await startMcp(dir, { pin: 'sess_benchaaaaaaaaaaaaaaaaaa' });
    const b = await startMcp(dir, { pin: 'sess_benchbbbbbbbbbbbbbbbbbb' });
    for (let i = 0; i < CHANNELS; i++) {
      await a.call('opencomms_create', { channel: `m${i}`, role: 'A', role_prompt: 'send', rate_limit: 1000 });
      await b.call('opencomms_join', { channel: `m${i}`, role: 'B', role_prompt: 'read' });
    }
    let sends = 0;
    const send = async () => {
      const r = await a.call('opencomms_send', { channel: `m${sends % CHANNELS}`, content: `mcp ${sends}` });
      if (!r.ok) throw new Error(r.message);
      sends++;
    };
    for (let i = 0; i < 100; i++) await send();
    await b.call('opencomms_pull', { limit: 100 });

    const rt: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const t = now();
      await send();
      rt.push(now() - t);
      if (sends % 20 === 0) await b.call('opencomms_pull', { limit: 100 });
    }
    emit('mcp_send_roundtrip', { unit: 'ms', ...stats(rt), target: 'p50 <= 1.2' });

    const pulls: number[] = [];
    for (let k = 0; k < 15; k++) {
      for (let i = 0; i < 100; i++) await send();
      const t = now();
      const r = await b.call('opencomms_pull', { limit: 100 });
      pulls.push(now() - t);
      if (r.data.messages.length !== 100) throw new Error(`pull returned ${r.data.messages.length}`);
    }
    emit('mcp_pull_100', { unit: 'ms', ...stats(pulls), target: 'p50 <= 2' });

    const start = sends;
    const t = now();
    while (now() - t < 3000) {
      await send();
      if (sends % 20 === 0) await b.call('opencomms_pull', { limit: 100 });
    }
    emit('mcp_sustained', { unit: 'sends/s', value: Math.round((sends - start) / ((now() - t) / 1000)), note: 'one call in flight; one pull per 20 sends', target: '>= 800' });

    while (sends < 10_000) {
      await send();
      if (sends % 20 === 0) await b.call('opencomms_pull', { limit: 100 });
    }
    const pid = (a.client.transport as unknown as { pid: number | null }).pid!;
    emit('mcp_server_rss_after_10k_sends', { unit: 'MB', value: await rssMb(pid), sends, target: '<= 100' });
    await a.close();
    await b.close();
  });
}
