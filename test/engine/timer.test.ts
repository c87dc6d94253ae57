// FEATURES.md §12 Timer (TMR-1..6), §5.8: the chess clock is advisory and driven by `now`.
import { describe, expect, it } from 'vitest';
import { dataOf, Sim } from './fixtures.ts';

type TimerStatus = {
  active_member_id: string | null;
  elapsed_ms_by_member: Record<string, number>;
  elapsed_ms_by_role: Record<string, number>;
  total_ms: number;
  limit_ms: number | null;
  limit_member_id: string | null;
  limit_reached: boolean;
};

const timerCmd = (sid: string, action: unknown, extra: Record<string, unknown> = {}) =>
  ({ op: 'timer', sid, args: { channel: 'team', action, ...extra } }) as const;
const t = (sim: Sim, sid: string, action: unknown, extra: Record<string, unknown> = {}) =>
  sim.ok(timerCmd(sid, action, extra));
const statusOf = (sim: Sim, sid = 'sess_a') => dataOf<TimerStatus>(t(sim, sid, 'status'));

function trio() {
  const sim = new Sim();
  sim.channel('team', [
    ['sess_a', 'Lead'],
    ['sess_b', 'Reviewer'],
    ['sess_c', 'Tester'],
  ]);
  return sim;
}

describe('TMR-1 start and stop', () => {
  it('runs one member’s clock at a time; repeated start/stop are ok no-ops', () => {
    const sim = trio();
    const s = t(sim, 'sess_a', 'start');
    expect(s.changed).toBe(true);
    expect(dataOf<TimerStatus>(s).active_member_id).toBe('sess_a');
    sim.advance(1000);
    const again = t(sim, 'sess_a', 'start');
    expect(again.changed).toBe(false);
    expect(sim.ch('team').timer.segment_started_at).toBe(sim.now - 1000);
    t(sim, 'sess_b', 'start');
    expect(sim.ch('team').timer).toMatchObject({ active_member_id: 'sess_b', elapsed_ms: { sess_a: 1000 } });
    sim.advance(500);
    const stop = t(sim, 'sess_c', 'stop');
    expect(dataOf<TimerStatus>(stop)).toMatchObject({
      active_member_id: null,
      elapsed_ms_by_member: { sess_a: 1000, sess_b: 500 },
      total_ms: 1500,
    });
    sim.advance(500);
    const stopped = t(sim, 'sess_a', 'stop');
    expect(stopped.changed).toBe(false);
    expect(dataOf<TimerStatus>(stopped).total_ms).toBe(1500);
    expect(statusOf(sim).elapsed_ms_by_role).toEqual({ Lead: 1000, Reviewer: 500 });
  });
});

describe('TMR-2 switch', () => {
  it('moves to the only peer; with 3 members it needs `to`; stale, self and unknown targets are refused', () => {
    const pair = new Sim();
    pair.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    t(pair, 'sess_a', 'start');
    pair.advance(200);
    expect(dataOf<TimerStatus>(t(pair, 'sess_a', 'switch'))).toMatchObject({
      active_member_id: 'sess_b',
      elapsed_ms_by_member: { sess_a: 200 },
    });

    const sim = trio();
    sim.refuse(timerCmd('sess_a', 'switch'), 'recipient_ambiguous');
    sim.refuse(timerCmd('sess_a', 'switch', { to: 'sess_a' }), 'recipient_not_found');
    sim.refuse(timerCmd('sess_a', 'switch', { to: 'Designer' }), 'recipient_not_found');
    expect(dataOf<TimerStatus>(t(sim, 'sess_a', 'switch', { to: 'tester' })).active_member_id).toBe('sess_c');
    sim.ok({ op: 'mark_stale', session: 'sess_b' });
    sim.refuse(timerCmd('sess_a', 'switch', { to: 'Reviewer' }), 'recipient_stale');

    const solo = new Sim();
    solo.create('sess_a', 'team', 'Lead');
    solo.refuse(timerCmd('sess_a', 'switch'), 'no_recipient');
  });
});

describe('TMR-3 sends switch the clock', () => {
  it('every send folds the running segment and starts the first recipient’s clock; attribution across 3 members', () => {
    const sim = trio();
    sim.send('sess_a', 'team', 'to b', { to: 'sess_b' });
    expect(sim.ch('team').timer.active_member_id).toBe('sess_b');
    sim.advance(3000);
    sim.send('sess_b', 'team', 'to c', { to: 'Tester' });
    sim.advance(2000);
    sim.send('sess_c', 'team', 'to all', { broadcast: true });
    // Broadcast: the first recipient in roster order.
    expect(sim.ch('team').timer.active_member_id).toBe('sess_a');
    sim.advance(1000);
    sim.send('sess_a', 'team', 'to c again', { to: 'sess_c' });
    sim.advance(500);
    expect(statusOf(sim)).toMatchObject({
      active_member_id: 'sess_c',
      elapsed_ms_by_member: { sess_a: 1000, sess_b: 3000, sess_c: 2500 },
      elapsed_ms_by_role: { Lead: 1000, Reviewer: 3000, Tester: 2500 },
      total_ms: 6500,
    });
  });

  it('a refused send does not touch the clock', () => {
    const sim = trio();
    t(sim, 'sess_a', 'start');
    sim.refuse({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'x' } }, 'recipient_ambiguous');
    expect(sim.ch('team').timer.active_member_id).toBe('sess_a');
  });
});

describe('TMR-4 limits', () => {
  it('set_limit without `to` limits the total, with `to` one member (self allowed)', () => {
    const sim = trio();
    expect(dataOf<TimerStatus>(t(sim, 'sess_a', 'set_limit', { limit_ms: 5000 }))).toMatchObject({
      limit_ms: 5000,
      limit_member_id: null,
    });
    expect(dataOf<TimerStatus>(t(sim, 'sess_a', 'set_limit', { limit_ms: 2000, to: 'reviewer' }))).toMatchObject({
      limit_ms: 2000,
      limit_member_id: 'sess_b',
    });
    expect(dataOf<TimerStatus>(t(sim, 'sess_a', 'set_limit', { limit_ms: 100.5, to: 'sess_a' }))).toMatchObject({
      limit_ms: 100.5,
      limit_member_id: 'sess_a',
    });
    t(sim, 'sess_a', 'start');
    sim.advance(100);
    expect(statusOf(sim).limit_reached).toBe(false);
    sim.advance(1);
    expect(statusOf(sim).limit_reached).toBe(true);
    // Another member's clock does not count toward a member limit.
    t(sim, 'sess_a', 'set_limit', { limit_ms: 2000, to: 'sess_b' });
    sim.advance(10_000);
    expect(statusOf(sim).limit_reached).toBe(false);
  });

  it('NaN, ≤0, infinite and non-numeric limits → invalid_limit; unknown `to` → target_not_found', () => {
    const sim = trio();
    for (const bad of [NaN, 0, -1, Infinity, -Infinity, 'abc', undefined, null, '0'])
      sim.refuse(timerCmd('sess_a', 'set_limit', { limit_ms: bad }), 'invalid_limit');
    const nf = sim.refuse(timerCmd('sess_a', 'set_limit', { limit_ms: 10, to: 'nobody' }), 'target_not_found');
    expect(dataOf(nf).members).toContain('Lead (sess_a)');
  });
});

describe('TMR-5 reset, clear_limit, refusals', () => {
  it('reset zeroes every clock and stops it; the limit is kept; clear_limit clears it', () => {
    const sim = trio();
    t(sim, 'sess_a', 'set_limit', { limit_ms: 999 });
    t(sim, 'sess_a', 'start');
    sim.advance(5000);
    const r = dataOf<TimerStatus>(t(sim, 'sess_b', 'reset'));
    expect(r).toMatchObject({
      active_member_id: null,
      elapsed_ms_by_member: {},
      total_ms: 0,
      limit_ms: 999,
      limit_reached: false,
    });
    const c = dataOf<TimerStatus>(t(sim, 'sess_c', 'clear_limit'));
    expect(c).toMatchObject({ limit_ms: null, limit_member_id: null });
  });

  it('non-members and unknown actions are refused', () => {
    const sim = trio();
    sim.refuse(timerCmd('sess_z', 'start'), 'not_member');
    sim.refuse({ op: 'timer', sid: 'sess_a', args: { channel: 'ghost', action: 'start' } }, 'channel_not_found');
    const bad = sim.refuse(timerCmd('sess_a', 'pause'), 'invalid_timer_action');
    expect(dataOf(bad).valid_actions).toEqual([
      'start',
      'stop',
      'switch',
      'reset',
      'status',
      'set_limit',
      'clear_limit',
    ]);
    sim.refuse(timerCmd('sess_a', undefined), 'invalid_timer_action');
    // Actions are case-insensitive.
    expect(t(sim, 'sess_a', ' START ').changed).toBe(true);
  });
});

describe('TMR-6 the running segment', () => {
  it('shows in timer and channel status; a total limit trips while it runs', () => {
    const sim = trio();
    t(sim, 'sess_a', 'set_limit', { limit_ms: 60_000 });
    t(sim, 'sess_b', 'start');
    sim.advance(59_999);
    expect(statusOf(sim)).toMatchObject({
      active_member_id: 'sess_b',
      elapsed_ms_by_member: { sess_b: 59_999 },
      limit_reached: false,
    });
    sim.advance(1);
    expect(statusOf(sim)).toMatchObject({ total_ms: 60_000, limit_reached: true });
    // Nothing was folded: the status computed the running segment.
    expect(sim.ch('team').timer.elapsed_ms).toEqual({});
    const [ch] = dataOf<{ channels: { timer: TimerStatus }[] }>(
      sim.ok({ op: 'status', sid: 'sess_c', args: {} }),
    ).channels;
    expect(ch!.timer).toMatchObject({ total_ms: 60_000, limit_reached: true });
    // Advisory: it blocks nothing.
    sim.send('sess_a', 'team', 'still allowed', { to: 'sess_c' });
  });

  it('markStale folds the departing member’s segment', () => {
    const sim = trio();
    t(sim, 'sess_b', 'start');
    sim.advance(4000);
    sim.ok({ op: 'mark_stale', session: 'sess_b' });
    expect(sim.ch('team').timer).toMatchObject({
      active_member_id: null,
      segment_started_at: null,
      elapsed_ms: { sess_b: 4000 },
    });
    sim.advance(4000);
    expect(statusOf(sim).total_ms).toBe(4000);
    // Marking an already-stale member again changes nothing.
    expect(sim.run({ op: 'mark_stale', session: 'sess_b' }).changed).toBe(false);
  });
});
