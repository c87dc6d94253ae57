// FEATURES.md §12 Kick and membership (KCK-1..5), §5.9.
import { describe, expect, it } from 'vitest';
import { checkTrail, dataOf, idsOf, mustPrompt, Sim } from './fixtures.ts';

const kickCmd = (by: string, args: Record<string, unknown>) =>
  ({ op: 'kick', caller: by, args: { channel: 'team', ...args } }) as const;

function four() {
  const sim = new Sim();
  sim.channel('team', [
    ['sess_a', 'Lead'],
    ['sess_b', 'Coordinator'],
    ['sess_c', 'Tester'],
    ['sess_d', 'Writer', 'pull'],
  ]);
  return sim;
}

describe('KCK-1 the coordinator kicks', () => {
  it('each remaining member gets one system notice; the target’s pending mail there → rejected', () => {
    const sim = four();
    sim.channel('side', [
      ['sess_c', 'Tester'],
      ['sess_a', 'Lead'],
    ]);
    const onTeam = idsOf(sim.send('sess_a', 'team', 'for tester', { to: 'sess_c' }));
    const onSide = idsOf(sim.send('sess_a', 'side', 'side mail'));
    const o = sim.ok(kickCmd('sess_a', { target_role: 'tester' }));
    expect(dataOf(o)).toEqual({
      kicked_session_id: 'sess_c',
      kicked_role: 'Tester',
      remaining_session_ids: ['sess_a', 'sess_b', 'sess_d'],
    });
    expect(sim.ch('team').members.map((m) => m.session_id)).toEqual(['sess_a', 'sess_b', 'sess_d']);
    expect(sim.msg(onTeam[0]!).delivery_status).toBe('rejected');
    checkTrail(sim.msg(onTeam[0]!));
    // Other channels' mail for the target is untouched.
    expect(sim.msg(onSide[0]!).delivery_status).toBe('pending');
    expect(sim.queue('sess_c')).toEqual(onSide);

    const notices = Object.values(sim.state.messages).filter((e) => e.message_type === 'system');
    expect(notices.map((e) => e.recipient_session_id).sort()).toEqual(['sess_a', 'sess_b', 'sess_d']);
    for (const n of notices) {
      expect(n).toMatchObject({
        sender_session_id: 'sess_a',
        sender_role: 'Lead',
        channel_id: sim.ch('team').id,
        delivery_status: 'pending',
        hop_count: 0,
      });
      expect(n.content).toBe('Tester (sess_c) was removed from channel "team" by Lead (sess_a).');
      expect(sim.queue(n.recipient_session_id)).toContain(n.message_id);
    }
    expect(o.effects).toEqual([{ type: 'Wake', recipients: ['sess_a', 'sess_b', 'sess_d'] }]);
    // Notices follow the delivery rules: push drains, pull reads.
    const p = mustPrompt(sim.drain('sess_b'));
    expect(p.text).toContain('type: system');
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_d', args: {} })).message_ids).toHaveLength(1);
  });

  it('system notices skip the rate, dedup and hop rules', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
        ['sess_c', 'Tester'],
        ['sess_d', 'Writer'],
      ],
      { rate_limit: 1 },
    );
    sim.send('sess_a', 'team', 'uses the quota', { broadcast: true });
    sim.ok(kickCmd('sess_a', { target_session_id: 'sess_b' }));
    sim.ok(kickCmd('sess_a', { target_session_id: 'sess_c' }));
    expect(sim.ch('team').rate.count).toBe(1);
    expect(sim.everything().filter((e) => e.message_type === 'system')).toHaveLength(5);
  });

  it('operator removal needs no coordinator and signs as Operator; a stale target can be removed', () => {
    const sim = four();
    sim.ok({ op: 'mark_stale', session: 'sess_a' });
    const o = sim.ok({
      op: 'kick',
      caller: { operator: true },
      args: { channel: 'team', target_session_id: 'sess_a' },
    });
    expect(dataOf(o).kicked_session_id).toBe('sess_a');
    const n = Object.values(sim.state.messages).find((e) => e.message_type === 'system')!;
    expect(n).toMatchObject({ sender_session_id: 'operator', sender_role: 'Operator' });
    expect(n.content).toContain('by the operator');
    expect(sim.ch('team').members[0]!.session_id).toBe('sess_b');
  });
});

describe('KCK-2 refusals', () => {
  it('non-coordinators, self-kicks by id or role, unknown and missing targets', () => {
    const sim = four();
    const nc = sim.refuse(kickCmd('sess_b', { target_session_id: 'sess_c' }), 'not_coordinator');
    expect(dataOf(nc).coordinator_role).toBe('Lead');
    expect(nc.result.message).toMatch(/ask/i);
    sim.refuse(kickCmd('sess_a', { target_session_id: 'sess_a' }), 'cannot_kick_self');
    const self = sim.refuse(kickCmd('sess_a', { target_role: ' LEAD ' }), 'cannot_kick_self');
    expect(self.result.message).toMatch(/opencomms_disconnect/);
    const nf = sim.refuse(kickCmd('sess_a', { target_session_id: 'sess_zz' }), 'target_not_found');
    expect(dataOf(nf).members).toContain('Tester (sess_c)');
    sim.refuse(kickCmd('sess_a', { target_role: 'Nobody' }), 'target_not_found');
    sim.refuse(kickCmd('sess_a', {}), 'target_required');
    sim.refuse(kickCmd('sess_a', { target_session_id: '  ', target_role: '' }), 'target_required');
  });

  it('check order: channel → membership → coordinator → target', () => {
    const sim = four();
    sim.refuse(kickCmd('sess_z', { channel: 'ghost' }), 'channel_not_found');
    sim.refuse(kickCmd('sess_z', {}), 'not_member');
    sim.refuse(kickCmd('sess_b', {}), 'not_coordinator');
    sim.refuse(kickCmd('sess_a', {}), 'target_required');
    // The id is tried first: an id that matches wins over a role that would match someone else.
    sim.ok(kickCmd('sess_a', { target_session_id: 'sess_c', target_role: 'Writer' }));
    expect(sim.ch('team').members.map((m) => m.session_id)).toEqual(['sess_a', 'sess_b', 'sess_d']);
  });
});

describe('KCK-3 authority follows members[0]', () => {
  it('a role called Coordinator confers nothing; after the coordinator leaves the next member may kick', () => {
    const sim = four();
    sim.refuse(kickCmd('sess_b', { target_role: 'Tester' }), 'not_coordinator');
    const d = sim.ok({ op: 'disconnect', sid: 'sess_a', args: { channel: 'team' } });
    expect(dataOf(d)).toEqual({ channel_removed: false, remaining_members: 3 });
    sim.ok(kickCmd('sess_b', { target_role: 'Tester' }));
    sim.refuse(kickCmd('sess_d', { target_role: 'Coordinator' }), 'not_coordinator');
  });
});

describe('KCK-4 timer and survival', () => {
  it('removal folds the target’s running segment; a channel left with one member survives', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    sim.ok({ op: 'timer', sid: 'sess_b', args: { channel: 'team', action: 'start' } });
    sim.advance(7000);
    sim.ok(kickCmd('sess_a', { target_session_id: 'sess_b' }));
    expect(sim.ch('team').timer).toMatchObject({
      active_member_id: null,
      segment_started_at: null,
      elapsed_ms: { sess_b: 7000 },
    });
    expect(sim.ch('team')).toMatchObject({
      lifecycle: 'active',
      members: [expect.objectContaining({ session_id: 'sess_a' })],
    });
  });

  it('a removal that is not the running clock leaves it running', () => {
    const sim = four();
    sim.ok({ op: 'timer', sid: 'sess_b', args: { channel: 'team', action: 'start' } });
    sim.advance(100);
    sim.ok(kickCmd('sess_a', { target_session_id: 'sess_c' }));
    expect(sim.ch('team').timer).toMatchObject({ active_member_id: 'sess_b', elapsed_ms: {} });
  });
});

describe('KCK-5 disconnect', () => {
  it('leaving one of two channels keeps the other channel’s queued mail', () => {
    const sim = new Sim();
    sim.channel('one', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    sim.channel('two', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    const m1 = idsOf(sim.send('sess_a', 'one', 'on one'))[0]!;
    const m2 = idsOf(sim.send('sess_a', 'two', 'on two'))[0]!;
    sim.advance(1);
    const m3 = idsOf(sim.send('sess_a', 'one', 'on one again'))[0]!;
    expect(sim.queue('sess_b')).toEqual([m1, m2, m3]);
    const d = sim.ok({ op: 'disconnect', sid: 'sess_b', args: { channel: 'one' } });
    expect(dataOf(d)).toEqual({ channel_removed: false, remaining_members: 1 });
    expect(sim.queue('sess_b')).toEqual([m2]);
    expect(sim.msg(m1).delivery_status).toBe('rejected');
    expect(sim.msg(m3).delivery_status).toBe('rejected');
    expect(sim.msg(m2).delivery_status).toBe('pending');
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual([m2]);
    sim.refuse({ op: 'send', sid: 'sess_b', args: { channel: 'one', content: 'x' } }, 'not_member');
  });

  it('the last member leaving removes the channel', () => {
    const sim = new Sim();
    sim.create('sess_a', 'solo', 'Lead');
    const d = sim.ok({ op: 'disconnect', sid: 'sess_a', args: { channel: 'solo' } });
    expect(dataOf(d)).toEqual({ channel_removed: true, remaining_members: 0 });
    expect(sim.state.channels.solo).toBeUndefined();
  });
});

describe('update_role', () => {
  it('changes only the caller’s own prompt (trimmed); a blank prompt is refused', () => {
    const sim = four();
    const o = sim.ok({
      op: 'update_role',
      sid: 'sess_b',
      args: { channel: 'team', role_prompt: '  Coordinate releases. ' },
    });
    expect(dataOf(o)).toEqual({ channel_id: sim.ch('team').id, role: 'Coordinator' });
    expect(sim.member('team', 'sess_b').role_prompt).toBe('Coordinate releases.');
    expect(sim.member('team', 'sess_a').role_prompt).toBe('Act as Lead.');
    sim.refuse(
      { op: 'update_role', sid: 'sess_b', args: { channel: 'team', role_prompt: '   ' } },
      'role_prompt_required',
    );
    sim.refuse({ op: 'update_role', sid: 'sess_z', args: { channel: 'team', role_prompt: 'x' } }, 'not_member');
  });
});
