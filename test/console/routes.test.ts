// Every route of the console API (FEATURES.md §10.2) and the page's own files: CON-1 (create → an
// empty card with a join command per host), CON-2 (remove severs the link and notifies the rest),
// CON-3 (save → restore as new → delete), the live machine view.
import { describe, expect, it } from 'vitest';
import { JOIN_HOSTS } from '../../adapters/join-commands.ts';
import type { Caller } from '../../src/engine/index.ts';
import { machineId } from '../../src/runtime/machine.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { useConsole } from './fixtures.ts';

const c = useConsole();

/** Two pull members and a third on "team", created by agents through the runtime. */
async function seed() {
  const rt = openRuntime(c.dir);
  const caller = (sid: string): Caller => ({
    session_id: sid,
    host: 'codex',
    surface: 'mcp',
    delivery_mode: 'pull',
    host_session_id: null,
    project_id: 'local-project',
    worktree: c.dir,
  });
  await rt.run({
    op: 'create',
    caller: caller('sess_lead'),
    args: { channel: 'team', role: 'Lead', role_prompt: 'lead' },
  });
  await rt.run({
    op: 'join',
    caller: caller('sess_rev'),
    args: { channel: 'team', role: 'Reviewer', role_prompt: 'review' },
  });
  await rt.run({
    op: 'join',
    caller: caller('sess_test'),
    args: { channel: 'team', role: 'Tester', role_prompt: 'test' },
  });
  await rt.run({ op: 'send', sid: 'sess_lead', args: { channel: 'team', content: 'please review', to: 'Reviewer' } });
  return rt;
}

describe('the page and its files', () => {
  it('GET / serves the page, its script and stylesheet, with a same-origin-only CSP', async () => {
    const page = await c.req('GET', '/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.text).toContain('<script type="module" src="/app.js">');
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.headers['content-security-policy']).toContain("connect-src 'self'");
    expect((await c.req('GET', '/app.js')).headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect((await c.req('GET', '/style.css')).status).toBe(200);
    // Nothing on the page names another host: no CDN, no external request.
    for (const path of ['/', '/app.js', '/style.css'])
      expect((await c.req('GET', path)).text).not.toMatch(/https?:\/\/(?!127\.0\.0\.1|localhost)/);
  });

  it('GET /api/machines serves each machine diagram with one node per state', async () => {
    const r = await c.req('GET', '/api/machines');
    expect(r.status).toBe(200);
    expect(Object.keys(r.json.data).sort()).toEqual(['channel', 'envelope', 'member', 'recipient', 'wake']);
    for (const s of ['pending', 'in_flight', 'delivered', 'failed', 'rejected', 'stale'])
      expect(r.json.data.envelope).toContain(`data-state="${s}"`);
    for (const s of ['ready', 'cooling', 'blocked', 'delivering'])
      expect(r.json.data.recipient).toContain(`data-state="${s}"`);
    for (const s of ['quiet', 'woken', 'held']) expect(r.json.data.wake).toContain(`data-state="${s}"`);
    expect(r.json.data.envelope).not.toContain('<style>');
  });
});

describe('CON-1 channels', () => {
  it('GET /api/channels lists live cards and archives; POST creates an empty channel', async () => {
    expect((await c.req('GET', '/api/channels')).json).toEqual({
      ok: true,
      message: '0 live channel(s), 0 saved.',
      data: { live: [], archived: [] },
    });
    const made = await c.req('POST', '/api/channels', { body: { name: 'Review', max_members: 3 } });
    expect(made.status).toBe(200);
    expect(made.json.data).toMatchObject({ name: 'review', max_members: 3 });
    const rt = openRuntime(c.dir);
    expect((await rt.read()).channels.review).toMatchObject({
      project_id: 'gui-local-project',
      members: [],
      lifecycle: 'active',
    });
    await rt.close();
    const list = (await c.req('GET', '/api/channels')).json.data;
    expect(list.live).toEqual([
      {
        name: 'review',
        channel_id: expect.stringMatching(/^chn_/),
        lifecycle: 'active',
        parent_channel_id: null,
        description: null,
        max_members: 3,
        paused: false,
        agents: [],
      },
    ]);
    const dup = await c.req('POST', '/api/channels', { body: { name: 'review' } });
    expect(dup.status).toBe(400);
    expect(dup.json).toMatchObject({ ok: false, data: { reason: 'channel_exists' } });
    expect((await c.req('POST', '/api/channels', { body: { name: 'Not ok!' } })).json.data.reason).toBe(
      'invalid_channel_name',
    );
    expect((await c.req('POST', '/api/channels', { body: {} })).json.data.reason).toBe('invalid_channel_name');
  });

  it('GET …/join-command gives the command for every host; refusals are 400', async () => {
    await c.req('POST', '/api/channels', { body: { name: 'review' } });
    for (const host of JOIN_HOSTS) {
      const r = await c.req('GET', `/api/channels/review/join-command?host=${host}`);
      expect(r.status).toBe(200);
      expect(r.json.data).toMatchObject({ session: 'review', host });
    }
    expect((await c.req('GET', '/api/channels/review/join-command')).json.data.command).toBe(
      '/OpenComms Join Channel=review As=<role> [role instructions]',
    );
    expect((await c.req('GET', '/api/channels/review/join-command?host=codex&role=Builder')).json.data.command).toBe(
      'opencomms_join(channel="review", role="Builder", role_prompt="...", spawn_push=true)',
    );
    const bad = await c.req('GET', '/api/channels/review/join-command?host=gemini');
    expect(bad).toMatchObject({ status: 400, json: { data: { reason: 'invalid_argument', field: 'host' } } });
    expect((await c.req('GET', '/api/channels/nope/join-command')).json.data.reason).toBe('channel_not_found');
  });
});

describe('CON-2 members', () => {
  it('GET …/members shows honest agent states; POST …/members/remove severs one link and notifies the rest', async () => {
    const rt = await seed();
    const members = (await c.req('GET', '/api/channels/team/members')).json.data;
    expect(members).toMatchObject({ kind: 'live', name: 'team', compact_context: null });
    expect(members.agents.map((a: { role: string; state: string }) => `${a.role}:${a.state}`)).toEqual([
      'Lead:Idle',
      'Reviewer:Working',
      'Tester:Idle',
    ]);
    // Each agent's machine and lease (the file store keeps none: n/a; all on this machine).
    expect(members.machine).toBe(machineId());
    for (const a of members.agents)
      expect(a).toMatchObject({ machine: machineId(), this_machine: true, process: null, lease: 'n/a' });
    await rt.run({ op: 'mark_stale', session: 'sess_test' });
    expect((await c.req('GET', '/api/channels/team/members')).json.data.agents[2].state).toBe('Offline');

    const missing = await c.req('POST', '/api/channels/team/members/remove', { body: { target_role: 'Nobody' } });
    expect(missing).toMatchObject({ status: 400, json: { data: { reason: 'target_not_found' } } });
    expect((await c.req('POST', '/api/channels/team/members/remove', { body: {} })).json.data.reason).toBe(
      'target_required',
    );
    const removed = await c.req('POST', '/api/channels/team/members/remove', {
      body: { target_session_id: 'sess_rev' },
    });
    expect(removed.status).toBe(200);
    expect(removed.json.data).toMatchObject({ kicked_session_id: 'sess_rev', kicked_role: 'Reviewer' });
    const state = await rt.read();
    expect(state.channels.team!.members.map((m) => m.role)).toEqual(['Lead', 'Tester']);
    // Each remaining member got one system notice from the operator; the removed member's mail was rejected.
    const notices = Object.values(state.messages).filter((e) => e.message_type === 'system');
    expect(notices.map((e) => [e.recipient_role, e.sender_role])).toEqual([
      ['Lead', 'Operator'],
      ['Tester', 'Operator'],
    ]);
    expect(notices[0]!.content).toBe('Reviewer (sess_rev) was removed from channel "team" by the operator.');
    expect(Object.values(state.messages).filter((e) => e.recipient_session_id === 'sess_rev')).toEqual([]);
    await rt.close();
  });
});

describe('pause and resume delivery', () => {
  it('POST …/pause holds a live channel (sends refused), DELETE …/pause releases it; refusals are 400 with the reason', async () => {
    const rt = await seed();
    const paused = await c.req('POST', '/api/channels/team/pause');
    expect(paused).toMatchObject({
      status: 200,
      json: { ok: true, message: 'Paused "team": delivery is held.', data: { paused: true, changed: true } },
    });
    expect((await c.req('GET', '/api/channels/team/members')).json.data.paused).toBe(true);
    expect(
      await rt.run({ op: 'send', sid: 'sess_test', args: { channel: 'team', content: 'held?', to: 'Lead' } }),
    ).toMatchObject({ ok: false, data: { reason: 'channel_paused' } });
    const resumed = await c.req('DELETE', '/api/channels/team/pause');
    expect(resumed).toMatchObject({ status: 200, json: { data: { paused: false, changed: true } } });
    expect((await rt.read()).channels.team!.paused).toBe(false);
    expect(await c.req('POST', '/api/channels/nope/pause')).toMatchObject({
      status: 400,
      json: { ok: false, data: { reason: 'channel_not_found' } },
    });
    await rt.close();
  });
});

describe('the operator speaks', () => {
  it('POST …/messages sends as Operator to one agent or everyone (framed, every rule applies); GET …/messages reads without taking mail', async () => {
    const rt = await seed();
    const one = await c.req('POST', '/api/channels/team/messages', { body: { content: 'ship it', to: 'Tester' } });
    expect(one).toMatchObject({ status: 200, json: { ok: true, data: { recipients: [{ role: 'Tester' }] } } });
    const all = await c.req('POST', '/api/channels/team/messages', { body: { content: 'standup', broadcast: true } });
    expect(all.json.data.recipients.map((r: { role: string }) => r.role).sort()).toEqual([
      'Lead',
      'Reviewer',
      'Tester',
    ]);
    const read = (await c.req('GET', '/api/channels/team/messages')).json.data.messages as Array<{
      sender_role: string;
      content: string;
      delivery_status: string;
    }>;
    expect(read.filter((m) => m.sender_role === 'Operator').map((m) => m.delivery_status)).toEqual([
      'pending',
      'pending',
      'pending',
      'pending',
    ]);
    const pulled = await rt.run({ op: 'pull', sid: 'sess_test', args: {} });
    const framed = (pulled.data as { messages: Array<{ framed: string }> }).messages.map((m) => m.framed);
    expect(framed[0]).toMatch(/^\[OpenComms\] from Operator \| type: manual \| id: ocm_/);
    expect(framed[0]).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nship it\n<<<END_UNTRUSTED_PEER_MESSAGE>>>');
    expect(await c.req('POST', '/api/channels/team/messages', { body: { content: '', to: 'Lead' } })).toMatchObject({
      status: 400,
      json: { data: { reason: 'content_empty' } },
    });
    await c.req('POST', '/api/channels/team/pause');
    expect(await c.req('POST', '/api/channels/team/messages', { body: { content: 'held', to: 'Lead' } })).toMatchObject(
      {
        status: 400,
        json: { ok: false, data: { reason: 'channel_paused' } },
      },
    );
    await rt.close();
  });
});

describe('CON-3 save → restore as new → delete', () => {
  it('saves with a summary, shows the archive, restores it as a new channel, deletes both', async () => {
    const rt = await seed();
    await rt.close();
    const saved = await c.req('POST', '/api/channels/team/save', { body: { summary: 'Goal: ship. State: reviewed.' } });
    expect(saved.status).toBe(200);
    expect(saved.json.data).toMatchObject({ message_count: 1, summary: 'Goal: ship. State: reviewed.' });
    expect((await c.req('POST', '/api/channels/team/save', { body: {} })).json.data.reason).toBe('lifecycle_refused');
    const archived = (await c.req('GET', '/api/channels/team/members')).json.data;
    expect(archived).toMatchObject({
      kind: 'archived',
      name: 'team',
      summary: 'Goal: ship. State: reviewed.',
      message_count: 1,
    });
    expect(archived.agents.map((a: { state: string }) => a.state)).toEqual(['Offline', 'Offline', 'Offline']);
    const list = (await c.req('GET', '/api/channels')).json.data;
    expect(list.live).toEqual([]);
    expect(list.archived).toMatchObject([{ name: 'team', message_count: 1, roles: ['Lead', 'Reviewer', 'Tester'] }]);

    const restored = await c.req('POST', '/api/channels/team/restore', { body: { new_name: 'team-2' } });
    expect(restored.status).toBe(200);
    expect(restored.json.data).toMatchObject({ name: 'team-2', members: [], archive_name: 'team' });
    const live = (await c.req('GET', '/api/channels/team-2/members')).json.data;
    expect(live).toMatchObject({ kind: 'live', agents: [], parent_channel_id: archived.archive_id });
    expect(live.compact_context).toContain('Goal: ship. State: reviewed.');
    expect((await c.req('POST', '/api/channels/team/restore', { body: { new_name: 'team-2' } })).json.data.reason).toBe(
      'channel_exists',
    );

    expect((await c.req('DELETE', '/api/channels/team-2')).json).toMatchObject({ ok: true, data: { deleted: 'live' } });
    expect((await c.req('DELETE', '/api/channels/team')).json).toMatchObject({
      ok: true,
      data: { deleted: 'archive' },
    });
    expect((await c.req('GET', '/api/channels')).json.data).toEqual({ live: [], archived: [] });
    expect((await c.req('DELETE', '/api/channels/team')).status).toBe(400);
  });
});

describe('the live machine view', () => {
  it('GET …/deliveries derives envelopes and recipients from state + now', async () => {
    const rt = await seed();
    await rt.run({ op: 'pull', sid: 'sess_rev', args: {} });
    await rt.run({ op: 'send', sid: 'sess_lead', args: { channel: 'team', content: 'and test', to: 'Tester' } });
    await rt.close();
    const v = (await c.req('GET', '/api/channels/team/deliveries')).json.data;
    expect(v).toMatchObject({ name: 'team', channel_state: 'active' });
    expect(
      v.envelopes.map((e: { recipient_role: string; delivery_status: string; held_by: string | null }) => [
        e.recipient_role,
        e.delivery_status,
        e.held_by,
      ]),
    ).toEqual([
      ['Tester', 'pending', 'awaiting_pull'],
      ['Reviewer', 'delivered', null],
    ]);
    expect(v.envelopes[1].transitions.map((t: { event: string }) => t.event)).toEqual(['SEND', 'PULL']);
    expect(v.recipients.map((r: { role: string; state: string }) => `${r.role}:${r.state}`)).toEqual([
      'Lead:ready',
      'Reviewer:ready',
      'Tester:blocked:awaiting_pull',
    ]);
    expect((await c.req('GET', '/api/channels/nope/deliveries')).json.data.reason).toBe('channel_not_found');
  });
});
