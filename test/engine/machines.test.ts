// Members across machines: a member records the machine that serves its session; the worktree
// check binds joiners on a machine the channel has members on, so a checkout of the same project at
// another path on another machine joins the same channel.
import { describe, expect, it } from 'vitest';
import { caller, Sim, WORKTREE } from './fixtures.ts';

const A = 'aaaaaaaa-0000-4000-8000-000000000001';
const B = 'bbbbbbbb-0000-4000-8000-000000000002';

describe('members on several machines', () => {
  it('a joiner on another machine at another path joins; on the same machine it is refused', () => {
    const sim = new Sim();
    sim.machine = A;
    sim.create('sess_a', 'team', 'Lead');
    sim.machine = B;
    const far = sim.run({
      op: 'join',
      caller: caller('sess_b', 'push', { worktree: '/home/b/checkout' }),
      args: { channel: 'team', role: 'Reviewer', role_prompt: 'Review.' },
    });
    expect(far.result.ok).toBe(true);
    expect(sim.ch('team').members.map((m) => m.machine)).toEqual([A, B]);
    sim.machine = A;
    const near = sim.run({
      op: 'join',
      caller: caller('sess_c', 'push', { worktree: '/elsewhere' }),
      args: { channel: 'team', role: 'Tester', role_prompt: 'Test.' },
    });
    expect(near.result).toMatchObject({ ok: false, data: { reason: 'worktree_mismatch' } });
  });

  it('any number of members on a machine join a channel made on another, from that machine one checkout', () => {
    const sim = new Sim();
    sim.machine = A;
    sim.create('sess_a', 'team', 'Lead');
    sim.machine = B;
    const join = (sid: string, role: string, worktree: string) =>
      sim.run({
        op: 'join',
        caller: caller(sid, 'push', { worktree }),
        args: { channel: 'team', role, role_prompt: `${role}.` },
      }).result;
    expect(join('sess_b1', 'Reviewer', '/home/b/checkout').ok).toBe(true);
    expect(join('sess_b2', 'Tester', '/home/b/checkout').ok).toBe(true);
    expect(join('sess_b3', 'Writer', '/home/b/checkout').ok).toBe(true);
    // A second clone on B is another checkout: its members see other files.
    expect(join('sess_b4', 'Auditor', '/home/b/other-clone')).toMatchObject({
      ok: false,
      data: { reason: 'worktree_mismatch' },
    });
    expect(sim.ch('team').members.map((m) => [m.machine, m.worktree])).toEqual([
      [A, WORKTREE],
      [B, '/home/b/checkout'],
      [B, '/home/b/checkout'],
      [B, '/home/b/checkout'],
    ]);
  });

  it('without machine ids (one machine, or members recorded before them) the worktree check is as before', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    sim.machine = B;
    const r = sim.run({
      op: 'join',
      caller: caller('sess_b', 'push', { worktree: '/home/b/checkout' }),
      args: { channel: 'team', role: 'Reviewer', role_prompt: 'Review.' },
    });
    expect(r.result).toMatchObject({ ok: false, data: { reason: 'worktree_mismatch' } });
  });

  it('a claim from another machine moves the session there', () => {
    const sim = new Sim();
    sim.machine = A;
    sim.create('sess_a', 'team', 'Lead');
    sim.machine = B;
    sim.by = 'p9@b';
    sim.run({ op: 'claim', session: 'sess_a' });
    expect(sim.ch('team').members[0]).toMatchObject({ owner: 'p9@b', machine: B });
  });
});
