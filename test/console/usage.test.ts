// Wakes and their cost in the console (operator.md "Wakes and their cost"): GET /api/usage (the CLI's
// `usage`), POST /api/channels/:name/release (the CLI's `release`), a hold another process records
// reaching the page within 1 s, and the page's own files using both.
import { describe, expect, it } from 'vitest';
import type { Caller } from '../../src/engine/index.ts';
import { USAGE_BUCKET_MS } from '../../src/protocol/limits.ts';
import { type State, WakeLineSchema } from '../../src/protocol/schema.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { sse, useConsole } from './fixtures.ts';

const c = useConsole();
/** The page learns of any process's change within this long. */
const REFRESH_WITHIN_MS = 1000;

/** "team": Lead and Reviewer, a message from the Lead pending for the Reviewer. */
async function seed() {
  const rt = openRuntime(c.dir, { log: () => {} });
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
    args: { channel: 'team', role: 'Lead', role_prompt: 'l' },
  });
  await rt.run({
    op: 'join',
    caller: caller('sess_rev'),
    args: { channel: 'team', role: 'Reviewer', role_prompt: 'r' },
  });
  await rt.run({ op: 'send', sid: 'sess_lead', args: { channel: 'team', content: 'please review', to: 'Reviewer' } });
  return rt;
}

/** What the wake guard records when the loop guard holds the Reviewer's wakes, written by another
 *  process (this runtime's store, not the console's). */
async function holdReviewer(rt: ReturnType<typeof openRuntime>, now = Date.now()) {
  await rt.store.mutate((draft: State) => {
    const team = draft.channels.team!;
    const bucket = String(now - (now % USAGE_BUCKET_MS));
    const counters = { wakes: 6, routes: { 'codex/push': 6 }, held: 1, messages: 6, size: 2_400 };
    team.usage = { sess_rev: { total: counters, buckets: { [bucket]: counters } } };
    team.wakes = {
      sess_rev: WakeLineSchema.parse({
        at: now - 1_000,
        chain: 6,
        base: 0,
        starts: [now - 1_000],
        held_by: 'loop',
        held_since: now,
        held_newest: now,
      }),
    };
    team.holds.sess_rev = 'loop';
    return { changed: true, result: null };
  });
}

describe('GET /api/usage', () => {
  it("every live channel's cost report, or one (?channel=); an unknown or saved channel is 400", async () => {
    const rt = await seed();
    try {
      await holdReviewer(rt);
    } finally {
      await rt.close();
    }
    const all = await c.req('GET', '/api/usage');
    expect(all.status).toBe(200);
    expect(all.json).toMatchObject({
      ok: true,
      message: 'Usage of 1 live channel(s).',
      data: { token_estimate: { rule: 'ceil(size / 4)' }, bucket_ms: USAGE_BUCKET_MS },
    });
    const one = await c.req('GET', '/api/usage?channel=team');
    expect(one.status).toBe(200);
    const [team] = one.json.data.channels;
    expect(team.name).toBe('team');
    expect(team.members.find((m: { role: string }) => m.role === 'Reviewer')).toMatchObject({
      hold: { held_by: 'loop', pending: 1 },
      usage: { hour: { wakes: 6, routes: { 'codex/push': 6 }, held: 1, size: 2_400, tokens_estimate: 600 } },
    });
    expect(team.usage.total).toMatchObject({ wakes: 6, messages: 6 });
    const missing = await c.req('GET', '/api/usage?channel=nope');
    expect(missing.status).toBe(400);
    expect(missing.json).toMatchObject({ ok: false, data: { reason: 'channel_not_found' } });
    await c.req('POST', '/api/channels', { body: { name: 'old' } });
    await c.req('POST', '/api/channels/old/save', { body: {} });
    expect((await c.req('GET', '/api/usage?channel=old')).json).toMatchObject({
      ok: false,
      data: { reason: 'lifecycle_refused' },
    });
  });
});

describe('POST /api/channels/:name/release', () => {
  it('releases held wakes (every member, or {member}) and announces it; refusals are 400 and announce nothing', async () => {
    const rt = await seed();
    try {
      await holdReviewer(rt);
    } finally {
      await rt.close();
    }
    const events = await sse(c.server.port);
    try {
      await events.waitFor((e) => e.event === 'hello');
      const none = await c.req('POST', '/api/channels/team/release', { body: { member: 'Lead' } });
      expect(none.status).toBe(200);
      expect(none.json.message).toBe('No wake is held on "team" for Lead.');
      const one = await c.req('POST', '/api/channels/team/release', { body: { member: 'sess_rev' } });
      expect(one.status).toBe(200);
      expect(one.json).toMatchObject({ ok: true, data: { released: ['sess_rev'], roles: ['Reviewer'] } });
      await events.waitFor((e) => e.event === 'refresh' && e.data.reason === 'wakes_released');
      await new Promise((r) => setTimeout(r, 200)); // every announcement of the two answers is in
      const n = events.events.filter((e) => e.data?.reason).length;
      const unknown = await c.req('POST', '/api/channels/team/release', { body: { member: 'Nobody' } });
      expect(unknown.status).toBe(400);
      expect(unknown.json).toMatchObject({ ok: false, data: { reason: 'target_not_found' } });
      expect((await c.req('POST', '/api/channels/nope/release', { body: {} })).status).toBe(400);
      await new Promise((r) => setTimeout(r, 200));
      expect(events.events.filter((e) => e.data?.reason).length).toBe(n);
      expect((await c.req('GET', '/api/channels/team/release')).status).toBe(404);
    } finally {
      events.close();
    }
  });

  it('a cross-site release is forbidden (403), like every other change', async () => {
    const rt = await seed();
    await rt.close();
    const r = await c.req('POST', '/api/channels/team/release', {
      body: {},
      headers: { origin: 'https://evil.example' },
    });
    expect(r.status).toBe(403);
  });
});

describe('the page', () => {
  it('learns of a hold another process records within 1 s, and its next read shows it', async () => {
    const rt = await seed();
    const events = await sse(c.server.port);
    try {
      await events.waitFor((e) => e.event === 'hello');
      await new Promise((r) => setTimeout(r, 300)); // let the seed's own refreshes pass
      const before = events.events.length;
      await holdReviewer(rt);
      const heldAt = Date.now();
      const refresh = await events.waitFor(
        (e, i = events.events.indexOf(e)) => i >= before && e.event === 'refresh',
        REFRESH_WITHIN_MS,
      );
      expect(refresh.at - heldAt).toBeLessThan(REFRESH_WITHIN_MS);
      const u = await c.req('GET', '/api/usage?channel=team');
      expect(u.json.data.channels[0].members.find((m: { role: string }) => m.role === 'Reviewer').hold.held_by).toBe(
        'loop',
      );
    } finally {
      events.close();
      await rt.close();
    }
  });

  it("reads the usage with each channel's detail and has a Release button", async () => {
    const app = (await c.req('GET', '/app.js')).text;
    expect(app).toContain('/api/usage?channel=');
    expect(app).toContain('/release');
    expect(app).toContain("'Release'");
    expect(app).toContain('token_estimate.rule');
  });
});
