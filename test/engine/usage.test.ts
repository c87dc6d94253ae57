// The cost report (engine/usage.ts) on a fixed clock: windows summed from whole 10-minute buckets,
// the total since the channel began, the token estimate and its rule, each member's hold and its
// use of the wake budgets, a member that left, and the refusals of a channel it cannot report.
import { describe, expect, it } from 'vitest';
import { channelUsage, tokensEstimate, usageReport, usageResult, windowSince } from '../../src/engine/usage.ts';
import {
  CHARS_PER_TOKEN_ESTIMATE,
  DEFAULT_WAKES_PER_CHANNEL,
  DEFAULT_WAKES_PER_MEMBER,
  USAGE_BUCKET_MS,
  WAKE_BUDGET_WINDOW_MS,
} from '../../src/protocol/limits.ts';
import { type Channel, WakeLineSchema } from '../../src/protocol/schema.ts';
import { Sim, T0 } from './fixtures.ts';

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** A clock on a bucket's start plus 5 minutes: the windows' edges fall inside buckets. */
const NOW = Math.floor((T0 + 2 * DAY) / USAGE_BUCKET_MS) * USAGE_BUCKET_MS + 300_000;
const bucket = (ago: number) => Math.floor((NOW - ago) / USAGE_BUCKET_MS) * USAGE_BUCKET_MS;

const counters = (
  c: Partial<{ wakes: number; routes: Record<string, number>; held: number; messages: number; size: number }>,
) => ({
  wakes: 0,
  routes: {},
  held: 0,
  messages: 0,
  size: 0,
  ...c,
});

/** Channel "team": Lead (push) and Reviewer (push); Reviewer has mail pending. */
function team() {
  const sim = new Sim();
  sim.channel(
    'team',
    [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ],
    { rate_limit: 100 },
  );
  sim.send('sess_a', 'team', 'please review', { to: 'Reviewer' });
  sim.send('sess_a', 'team', 'and this', { to: 'Reviewer' });
  return sim;
}

/** Writes the wake guard's fields as the spec names them (channel.usage / wakes / holds / budgets). */
function ledger(ch: Channel) {
  const c = ch as Channel & Record<string, unknown>;
  c.usage = {
    sess_b: {
      total: counters({
        wakes: 9,
        routes: { 'host-push/push': 9, pull: 4 },
        held: 2,
        messages: 20,
        size: 10_001,
      }),
      buckets: {
        // in the last hour: the bucket now, and the one 55 minutes back (it overlaps the hour)
        [String(bucket(0))]: counters({ wakes: 2, routes: { 'host-push/push': 2 }, messages: 3, size: 400 }),
        [String(bucket(55 * 60_000))]: counters({
          wakes: 1,
          routes: { 'host-push/push': 1 },
          held: 1,
          messages: 1,
          size: 100,
        }),
        // in the last day only
        [String(bucket(2 * HOUR))]: counters({ wakes: 3, routes: { 'host-push/push': 3 }, messages: 6, size: 3_000 }),
        // older than a day (the ledger's total keeps it)
        [String(bucket(DAY + 2 * USAGE_BUCKET_MS))]: counters({
          wakes: 3,
          routes: { 'host-push/push': 3 },
          messages: 10,
          size: 6_501,
        }),
      },
    },
    sess_a: {
      total: counters({ messages: 1, size: 7, routes: { pull: 1 } }),
      buckets: { [String(bucket(0))]: counters({ messages: 1, size: 7, routes: { pull: 1 } }) },
    },
  };
  c.wakes = {
    sess_b: WakeLineSchema.parse({
      at: null,
      chain: 7,
      base: 0,
      starts: [NOW - WAKE_BUDGET_WINDOW_MS - 1, NOW - 50 * 60_000, NOW - 30 * 60_000, NOW - 1_000],
      held_by: 'loop',
      held_since: NOW - 120_000,
      held_newest: NOW - 120_000,
    }),
    sess_a: WakeLineSchema.parse({
      at: NOW - 5_000,
      chain: 1,
      base: 0,
      starts: [NOW - 5_000],
      held_by: null,
      held_since: null,
      held_newest: null,
    }),
  };
  ch.holds.sess_b = 'loop';
  c.budgets = { ...ch.budgets, max_wakes_per_member: 3, max_wakes_per_channel: null };
}

describe('usageReport', () => {
  it('sums whole 10-minute buckets for the last hour and the last day, and the total since the channel began', () => {
    const sim = team();
    ledger(sim.ch('team'));
    const r = usageReport(sim.state, NOW);
    expect(r.now).toBe(NOW);
    expect(r.bucket_ms).toBe(USAGE_BUCKET_MS);
    expect(r.windows.hour).toEqual({ ms: HOUR, since: windowSince(NOW, HOUR) });
    expect(r.windows.hour.since).toBe(NOW - HOUR - 300_000);
    expect(r.windows.day.since).toBe(NOW - DAY - 300_000);
    const [team_] = r.channels;
    const rev = team_!.members.find((m) => m.role === 'Reviewer')!;
    expect(rev.usage.hour).toEqual({
      wakes: 3,
      routes: { 'host-push/push': 3 },
      held: 1,
      messages: 4,
      size: 500,
      tokens_estimate: 125,
    });
    expect(rev.usage.day).toMatchObject({ wakes: 6, messages: 10, size: 3_500, tokens_estimate: 875 });
    expect(rev.usage.total).toMatchObject({
      wakes: 9,
      routes: { 'host-push/push': 9, pull: 4 },
      held: 2,
      messages: 20,
      size: 10_001,
      tokens_estimate: 2_501,
    });
    // The channel's windows are its members' sums.
    expect(team_!.usage.hour).toEqual({
      wakes: 3,
      routes: { 'host-push/push': 3, pull: 1 },
      held: 1,
      messages: 5,
      size: 507,
      tokens_estimate: 127,
    });
    expect(team_!.usage.total).toMatchObject({ wakes: 9, messages: 21, size: 10_008, tokens_estimate: 2_502 });
  });

  it('labels the token estimate with its rule: ceil(size / 4)', () => {
    const r = usageReport(team().state, NOW);
    expect(r.token_estimate).toMatchObject({ chars_per_token: CHARS_PER_TOKEN_ESTIMATE, rule: 'ceil(size / 4)' });
    expect(r.token_estimate.note).toMatch(/estimate/);
    expect([0, 1, 4, 5, 10_001].map(tokensEstimate)).toEqual([0, 1, 1, 2, 2_501]);
  });

  it("shows each member's hold (held_by, held_since, pending) and its wake budget use within the rolling hour", () => {
    const sim = team();
    ledger(sim.ch('team'));
    const [c] = usageReport(sim.state, NOW).channels;
    const rev = c!.members.find((m) => m.role === 'Reviewer')!;
    expect(rev.hold).toEqual({
      state: 'held',
      held_by: 'loop',
      held_since: NOW - 120_000,
      woken_at: null,
      chain: 7,
      pending: 2,
    });
    // Three starts inside the hour (the fourth is one ms outside it), against a budget of 3: spent
    // until the oldest of the three leaves the window.
    expect(rev.wake_budget).toEqual({ used: 3, budget: 3, next_free_at: NOW - 50 * 60_000 + WAKE_BUDGET_WINDOW_MS });
    const lead = c!.members.find((m) => m.role === 'Lead')!;
    expect(lead.hold).toMatchObject({
      state: 'woken',
      held_by: null,
      held_since: null,
      woken_at: NOW - 5_000,
      pending: 0,
    });
    expect(lead.wake_budget).toEqual({ used: 1, budget: 3, next_free_at: null });
    // The channel's budget is none; its use counts every member's starts.
    expect(c!.wake_budget).toEqual({ used: 4, budget: null, next_free_at: null, window_ms: WAKE_BUDGET_WINDOW_MS });
  });

  it('a channel without the wake guard fields reports zeros, no hold and the default budgets', () => {
    const sim = team();
    const ch = sim.ch('team') as unknown as Record<string, unknown>;
    delete ch.usage;
    delete ch.wakes;
    const { max_wakes_per_member: _m, max_wakes_per_channel: _c, ...budgets } = ch.budgets as Record<string, unknown>;
    ch.budgets = budgets;
    const [c] = usageReport(sim.state, NOW).channels;
    for (const m of c!.members) {
      expect(m.hold).toMatchObject({ state: 'quiet', held_by: null });
      expect(m.usage.total).toEqual({ wakes: 0, routes: {}, held: 0, messages: 0, size: 0, tokens_estimate: 0 });
      expect(m.wake_budget).toEqual({ used: 0, budget: DEFAULT_WAKES_PER_MEMBER, next_free_at: null });
    }
    expect(c!.wake_budget.budget).toBe(DEFAULT_WAKES_PER_CHANNEL);
  });

  it('a hold named only in channel.holds still shows; a host hold (busy) is not a wake hold', () => {
    const sim = team();
    const ch = sim.ch('team');
    ch.holds.sess_b = 'wake_budget';
    ch.holds.sess_a = 'busy';
    const [c] = usageReport(sim.state, NOW).channels;
    expect(c!.members.find((m) => m.role === 'Reviewer')!.hold.held_by).toBe('wake_budget');
    expect(c!.members.find((m) => m.role === 'Lead')!.hold.held_by).toBeNull();
  });

  it('keeps what a member that left cost (role null), and reads from a source without mail (pending null)', () => {
    const sim = team();
    const ch = sim.ch('team');
    ledger(ch);
    (ch as Channel & { usage: Record<string, unknown> }).usage.sess_gone = {
      total: counters({ wakes: 1, routes: { 'host-push/push': 1 }, messages: 1, size: 40 }),
      buckets: {},
    };
    const c = channelUsage(ch, NOW, null);
    const gone = c.members.find((m) => m.session_id === 'sess_gone')!;
    expect(gone).toMatchObject({ role: null, member: false, hold: { held_by: null, pending: null } });
    expect(c.usage.total.wakes).toBe(10);
    const fromIndex = usageReport({ channels: sim.state.channels }, NOW);
    expect(fromIndex.channels[0]!.members.every((m) => m.hold.pending === null)).toBe(true);
  });

  it('lists live channels by name, or the one asked for; usageResult refuses an unknown or saved name', () => {
    const sim = team();
    sim.create('sess_c', 'alpha', 'Solo');
    expect(usageReport(sim.state, NOW).channels.map((c) => c.name)).toEqual(['alpha', 'team']);
    expect(usageReport(sim.state, NOW, 'team').channels.map((c) => c.name)).toEqual(['team']);
    const one = usageResult(sim.state, { channel: 'TEAM' }, NOW);
    expect(one).toMatchObject({ ok: true, message: 'Usage of "team".' });
    expect(usageResult(sim.state, {}, NOW)).toMatchObject({ ok: true, message: 'Usage of 2 live channel(s).' });
    expect(usageResult(sim.state, { channel: 'nope' }, NOW)).toMatchObject({
      ok: false,
      data: { reason: 'channel_not_found' },
    });
    sim.ch('alpha').lifecycle = 'saved';
    sim.ch('alpha').members = [];
    expect(usageResult(sim.state, { channel: 'alpha' }, NOW)).toMatchObject({
      ok: false,
      data: { reason: 'lifecycle_refused' },
    });
  });
});

describe('the report of what the engine recorded', () => {
  /** Two push members that answer every wake within seconds: the loop guard holds the 7th wake. */
  function pingPong(sim: Sim, rounds: number) {
    for (let i = 0; i < rounds; i++) {
      const [from, to, rid] = i % 2 ? ['sess_b', 'Lead', 'sess_a'] : ['sess_a', 'Reviewer', 'sess_b'];
      sim.send(from!, 'team', `answer ${i}`, { to });
      sim.advance(2_000);
      const p = sim.drain(rid!).effects.find((e) => e.type === 'Prompt');
      if (p) sim.commit(p as Parameters<Sim['commit']>[0]);
      sim.advance(2_000);
    }
  }

  it('counts wakes by route, messages and characters handed over, and the hold of the loop guard; a release clears it', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 1000 },
    );
    pingPong(sim, 10);
    const [c] = usageReport(sim.state, sim.now).channels;
    const lead = c!.members.find((m) => m.role === 'Lead')!;
    const rev = c!.members.find((m) => m.role === 'Reviewer')!;
    // Six turns OpenComms started between them, then the Reviewer's next wake is held.
    expect(lead.usage.hour.wakes + rev.usage.hour.wakes).toBe(8);
    expect(rev.hold).toMatchObject({ held_by: 'loop', pending: 2 });
    expect(rev.hold.held_since).toBeGreaterThan(0);
    expect(rev.usage.hour.held).toBeGreaterThan(0);
    expect(lead.hold.held_by).toBeNull();
    for (const m of [lead, rev]) {
      expect(Object.keys(m.usage.hour.routes)).toEqual(['host-push/push']);
      expect(m.usage.hour.messages).toBe(m.usage.hour.wakes);
      expect(m.usage.hour.size).toBeGreaterThan(0);
      expect(m.usage.hour.tokens_estimate).toBe(Math.ceil(m.usage.hour.size / 4));
      expect(m.usage.total).toEqual(m.usage.hour);
      expect(m.wake_budget).toMatchObject({ used: m.usage.hour.wakes, budget: 60, next_free_at: null });
    }
    expect(c!.wake_budget).toMatchObject({ used: 8, budget: 240 });
    // The release lets the next wake through: the drain its Wake effect starts.
    sim.ok({ op: 'release_wakes', args: { channel: 'team', member: 'Reviewer' } });
    const p = sim.drain('sess_b').effects.find((e) => e.type === 'Prompt');
    if (p) sim.commit(p as Parameters<Sim['commit']>[0]);
    const after = usageReport(sim.state, sim.now).channels[0]!.members.find((m) => m.role === 'Reviewer')!;
    expect(after.hold).toMatchObject({ held_by: null, held_since: null, pending: 0 });
    expect(after.usage.hour.wakes).toBe(rev.usage.hour.wakes + 1);
  });

  it('a spent member budget holds as wake_budget and says when a slot frees', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 1000 },
    );
    sim.ok({ op: 'set_wake_budget', args: { channel: 'team', max_wakes_per_member: 2 } });
    const first = sim.now;
    // Replies 30 s apart answer no wake (chain 0): only the budget can hold them.
    for (let i = 0; i < 3; i++) {
      sim.send('sess_a', 'team', `request ${i}`, { to: 'Reviewer' });
      const p = sim.drain('sess_b').effects.find((e) => e.type === 'Prompt');
      if (p) sim.commit(p as Parameters<Sim['commit']>[0]);
      sim.advance(30_000);
    }
    const rev = usageReport(sim.state, sim.now).channels[0]!.members.find((m) => m.role === 'Reviewer')!;
    expect(rev.hold.held_by).toBe('wake_budget');
    expect(rev.wake_budget).toEqual({ used: 2, budget: 2, next_free_at: first + WAKE_BUDGET_WINDOW_MS });
  });
});
