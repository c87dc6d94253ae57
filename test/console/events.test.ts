// SSE (FEATURES.md §10.2): hello on connect; refresh within 1 s of a change made by another
// process (an MCP server's send), by the console itself (with its reason), and by an archive-only
// change (CON-5); nothing while nothing changes; a ping every 10 s.
import { copyFile, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { EventHub, SSE_PING_MS } from '../../src/console/events.ts';
import { startMcp } from '../helpers/mcp-client.ts';
import { sse, useConsole } from './fixtures.ts';

const c = useConsole();
/** §10.2: the page learns of any process's change within this long. */
const REFRESH_WITHIN_MS = 1000;

describe('GET /api/events', () => {
  it('says hello, then refreshes within 1 s of an MCP server process sending', async () => {
    const a = await startMcp(c.dir, { pin: 'sess_aaaaaaaaaaaaaaaaaaaaaaaa' });
    const b = await startMcp(c.dir, { pin: 'sess_bbbbbbbbbbbbbbbbbbbbbbbb' });
    try {
      expect((await a.call('opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'lead' })).ok).toBe(true);
      expect((await b.call('opencomms_join', { channel: 'team', role: 'Reviewer', role_prompt: 'review' })).ok).toBe(
        true,
      );
      const events = await sse(c.server.port);
      expect(events.res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      await events.waitFor((e) => e.event === 'hello');
      await new Promise((r) => setTimeout(r, 300)); // let the joins' own refreshes pass
      const before = events.events.length;
      const sent = await a.call('opencomms_send', { channel: 'team', content: 'review this' });
      const sentAt = Date.now();
      expect(sent.ok).toBe(true);
      const refresh = await events.waitFor(
        (e, i = events.events.indexOf(e)) => i >= before && e.event === 'refresh',
        REFRESH_WITHIN_MS,
      );
      expect(refresh.data).toEqual({ at: expect.any(Number) });
      expect(refresh.at - sentAt).toBeLessThan(REFRESH_WITHIN_MS);
      // The page's next read shows the envelope.
      const view = await c.req('GET', '/api/channels/team/deliveries');
      expect(view.json.data.envelopes).toMatchObject([
        { sender_role: 'Lead', recipient_role: 'Reviewer', delivery_status: 'pending' },
      ]);
      events.close();
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("announces the console's own actions with their reason", async () => {
    const events = await sse(c.server.port);
    await events.waitFor((e) => e.event === 'hello');
    await c.req('POST', '/api/channels', { body: { name: 'x' } });
    await events.waitFor((e) => e.event === 'refresh' && e.data.reason === 'channel_created');
    await c.req('POST', '/api/channels/x/save', { body: {} });
    await events.waitFor((e) => e.data?.reason === 'channel_saved');
    await c.req('POST', '/api/channels/x/restore', { body: { new_name: 'y' } });
    await events.waitFor((e) => e.data?.reason === 'channel_restored');
    await c.req('DELETE', '/api/channels/y');
    await events.waitFor((e) => e.data?.reason === 'channel_deleted');
    // A refused action announces nothing.
    const n = events.events.filter((e) => e.data?.reason).length;
    await c.req('POST', '/api/channels/nope/members/remove', { body: { target_role: 'X' } });
    await new Promise((r) => setTimeout(r, 200));
    expect(events.events.filter((e) => e.data?.reason).length).toBe(n);
    events.close();
  });

  it('CON-5 an archive-only change still refreshes; an idle project sends nothing', async () => {
    await c.req('POST', '/api/channels', { body: { name: 'keep' } });
    await c.req('POST', '/api/channels/keep/save', { body: {} });
    const archives = join(c.dir, '.opencomms', 'archives');
    const file = (await readdir(archives)).find((n) => n.startsWith('chn_')); // not the heads index beside it
    const backup = join(c.dir, 'backup.json');
    await copyFile(join(archives, file!), backup);
    await new Promise((r) => setTimeout(r, 300)); // the save's own file events pass
    const events = await sse(c.server.port);
    await events.waitFor((e) => e.event === 'hello');
    await new Promise((r) => setTimeout(r, 1200)); // two periodic rescans with nothing changed
    expect(events.events.filter((e) => e.event === 'refresh')).toEqual([]);
    // Removed by hand, then restored from a backup: state.json is untouched both times.
    await rm(join(archives, file!));
    await events.waitFor((e) => e.event === 'refresh', REFRESH_WITHIN_MS);
    expect((await c.req('GET', '/api/channels')).json.data.archived).toEqual([]);
    const n = events.events.length;
    await mkdir(archives, { recursive: true });
    await copyFile(backup, join(archives, file!));
    await events.waitFor((e, i = events.events.indexOf(e)) => i >= n && e.event === 'refresh', REFRESH_WITHIN_MS);
    expect((await c.req('GET', '/api/channels')).json.data.archived).toMatchObject([{ name: 'keep' }]);
    events.close();
  });
});

describe('EventHub', () => {
  it('pings every 10 s', () => {
    vi.useFakeTimers();
    try {
      const hub = new EventHub();
      const written: string[] = [];
      const res = { writeHead: () => {}, write: (t: string) => written.push(t), on: () => {}, end: () => {} };
      hub.add(res as never, { at: 1 });
      expect(written).toEqual(['event: hello\ndata: {"at":1}\n\n']);
      vi.advanceTimersByTime(SSE_PING_MS - 1);
      expect(written).toHaveLength(1);
      vi.advanceTimersByTime(1);
      expect(written[1]).toBe(': ping\n\n');
      hub.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
