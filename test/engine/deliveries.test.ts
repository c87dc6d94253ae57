// The live machine view (FEATURES.md §10.3), derived purely from state + now: envelope states,
// attempts, age against the window, holds; recipient states ready / cooling / blocked:<why> /
// delivering; agent states Offline / Working / Idle. The console and `opencomms watch` call the
// same functions.
import { describe, expect, it } from 'vitest';
import { agentState, deliveryView, holdOf } from '../../src/engine/deliveries.ts';
import { idsOf, mustPrompt, Sim } from './fixtures.ts';

function team(modeB: 'push' | 'pull' | 'spawn_push' = 'push') {
  const sim = new Sim();
  sim.channel(
    'team',
    [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer', modeB],
    ],
    { rate_limit: 100 },
  );
  return sim;
}
const view = (sim: Sim) => deliveryView(sim.state, sim.ch('team'), sim.logged(sim.ch('team').id), sim.now);
const recipient = (sim: Sim, sid: string) => view(sim).recipients.find((r) => r.session_id === sid)!;
const envelope = (sim: Sim, id: string) => view(sim).envelopes.find((e) => e.message_id === id)!;

describe('envelope view', () => {
  it('follows pending → in_flight → delivered with attempts, age, window and the receipt trail', () => {
    const sim = team();
    const [id] = idsOf(sim.send('sess_a', 'team', 'hello'));
    sim.advance(250);
    expect(envelope(sim, id!)).toMatchObject({
      sender_role: 'Lead',
      recipient_role: 'Reviewer',
      message_type: 'manual',
      delivery_status: 'pending',
      attempts: 0,
      max_attempts: 5,
      age_ms: 250,
      window_ms: 300_000,
      held_by: null,
      delivery_method: null,
    });
    const p = mustPrompt(sim.drain('sess_b'));
    expect(envelope(sim, id!)).toMatchObject({ delivery_status: 'in_flight', attempts: 1, held_by: null });
    sim.advance(5);
    sim.commit(p);
    // Terminal envelopes left state for the history log: the view still shows them, from `logged`.
    expect(sim.hot(id!)).toBeUndefined();
    const done = envelope(sim, id!);
    expect(done).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push', delivered_at: sim.now });
    expect(done.transitions.map((t) => `${t.event}→${t.to}`)).toEqual([
      'SEND→pending',
      'DRAIN→in_flight',
      'COMMIT→delivered',
    ]);
    expect(done.transitions.map((t) => t.at)).toEqual([sim.now - 255, sim.now - 5, sim.now]);
  });

  it('lists newest first and never shows another channel', () => {
    const sim = team();
    sim.channel('other', [
      ['sess_x', 'X'],
      ['sess_y', 'Y'],
    ]);
    const [first] = idsOf(sim.send('sess_a', 'team', 'one'));
    sim.advance(1);
    const [second] = idsOf(sim.send('sess_a', 'team', 'two'));
    sim.send('sess_x', 'other', 'elsewhere');
    expect(view(sim).envelopes.map((e) => e.message_id)).toEqual([second, first]);
  });
});

describe('holds', () => {
  it('paused, budget, stale member, cooldown and the host-reported busy hold', () => {
    const sim = team();
    const [id] = idsOf(sim.send('sess_a', 'team', 'x'));
    sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    expect(envelope(sim, id!).held_by).toBe('paused');
    expect(recipient(sim, 'sess_b').state).toBe('blocked:paused');
    sim.ok({ op: 'resume', sid: 'sess_a', args: { channel: 'team' } });

    sim.drain('sess_b', { hold: 'busy' });
    expect(envelope(sim, id!).held_by).toBe('busy');
    expect(recipient(sim, 'sess_b')).toMatchObject({ state: 'blocked:busy', machine_state: 'blocked' });

    sim.ok({ op: 'mark_stale', session: 'sess_b' });
    expect(envelope(sim, id!).held_by).toBe('stale_member');
    expect(recipient(sim, 'sess_b')).toMatchObject({
      state: 'blocked:stale_member',
      member_state: 'stale',
      agent_state: 'Offline',
    });
    sim.ok({ op: 'clear_stale', session: 'sess_b' });

    const p = mustPrompt(sim.drain('sess_b'));
    expect(recipient(sim, 'sess_b')).toMatchObject({
      state: 'delivering',
      machine_state: 'delivering',
      in_flight: 1,
      pending: 0,
      agent_state: 'Working',
    });
    sim.commit(p);
    const [next] = idsOf(sim.send('sess_a', 'team', 'y'));
    expect(envelope(sim, next!).held_by).toBe('cooldown');
    expect(recipient(sim, 'sess_b')).toMatchObject({ state: 'cooling', cooldown_until: sim.now + 1000, pending: 1 });
    sim.advance(1001);
    expect(envelope(sim, next!).held_by).toBeNull();
    expect(recipient(sim, 'sess_b').state).toBe('ready');
  });

  it('a message budget used up holds the mail as budget', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { budget_messages: 1 },
    );
    sim.send('sess_a', 'team', 'first');
    const [held] = idsOf(sim.send('sess_a', 'team', 'second'));
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toHaveLength(1);
    expect(envelope(sim, held!).held_by).toBe('budget');
    expect(holdOf(sim.ch('team'), sim.member('team', 'sess_b'), sim.now)).toBe('budget');
  });

  it('pull members wait for a read; unbound spawn_push members are ineligible', () => {
    const pull = team('pull');
    const [p] = idsOf(pull.send('sess_a', 'team', 'x'));
    expect(envelope(pull, p!)).toMatchObject({ held_by: 'awaiting_pull', window_ms: null });
    expect(recipient(pull, 'sess_b')).toMatchObject({ state: 'blocked:awaiting_pull', agent_state: 'Working' });
    pull.ok({ op: 'pull', sid: 'sess_b', args: {} });
    expect(envelope(pull, p!)).toMatchObject({ delivery_status: 'delivered', delivery_method: 'pull', held_by: null });
    expect(recipient(pull, 'sess_b')).toMatchObject({ state: 'ready', agent_state: 'Idle', pending: 0 });

    const spawn = team('spawn_push');
    const [s] = idsOf(spawn.send('sess_a', 'team', 'x'));
    expect(envelope(spawn, s!).held_by).toBe('ineligible');
    expect(recipient(spawn, 'sess_b').state).toBe('blocked:ineligible');
  });

  it('an idle member with nothing addressed to it is Idle and ready', () => {
    const sim = team();
    expect(agentState(sim.state, sim.ch('team'), sim.member('team', 'sess_b'))).toBe('Idle');
    expect(recipient(sim, 'sess_b')).toMatchObject({
      state: 'ready',
      member_state: 'linked',
      pending: 0,
      in_flight: 0,
      cooldown_until: null,
    });
  });
});

describe('channel state', () => {
  it('is the channel machine state', () => {
    const sim = team();
    expect(view(sim).channel_state).toBe('active');
    sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    expect(view(sim).channel_state).toBe('paused');
  });
});
