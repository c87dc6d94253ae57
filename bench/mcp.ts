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
    // m0..m11 share the rotating sends; solo0/solo1 carry only the single-channel pulls.
    for (const name of [...Array.from({ length: CHANNELS }, (_, i) => `m${i}`), 'solo0', 'solo1']) {
      await a.call('opencomms_create', { channel: name, role: 'A', role_prompt: 'send', rate_limit: 1000 });
      await b.call('opencomms_join', { channel: name, role: 'B', role_prompt: 'read' });
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

    // A member reading one channel (the common case), and one reading all 12 of its channels,
    // which appends to (and fsyncs) one history log per channel.
    for (const [figure, single] of [['mcp_pull_100', true], ['mcp_pull_100_across_12_channels', false]] as const) {
      const pulls: number[] = [];
      for (let k = 0; k < 15; k++) {
        const channel = single ? `solo${k % 2}` : undefined; // two channels in turn: each stays under its rate limit
        for (let i = 0; i < 100; i++) {
          const r = await a.call('opencomms_send', { channel: channel ?? `m${sends % CHANNELS}`, content: `mcp ${sends++}` });
          if (!r.ok) throw new Error(r.message);
        }
        const t = now();
        const r = await b.call('opencomms_pull', { limit: 100, ...(channel ? { channel } : {}) });
        pulls.push(now() - t);
        if (r.data.messages.length !== 100) throw new Error(`pull returned ${r.data.messages.length}`);
      }
      emit(figure, { unit: 'ms', ...stats(pulls), target: 'p50 <= 2' });
    }

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
