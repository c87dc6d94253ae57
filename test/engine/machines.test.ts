// Members across machines: a member records the machine that serves its session; the worktree
// check binds joiners on a machine the channel has members on, so a checkout of the same project at
// another path on another machine joins the same channel.
import { describe, expect, it } from 'vitest';
import { caller, Sim } from './fixtures.ts';

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
