// Fencing: a commit or requeue settles only the envelopes its caller still holds (the process tag
// the batch was drained under and the attempt of that hand-over). A process that lost its hold (a
// sweep declared it dead: a crash, a partition past its lease) and answers late is refused with
// `hold_lost`, the refusal is recorded, and nothing it answers is applied.
import { describe, expect, it } from 'vitest';
import { dataOf, idsOf, mustPrompt, Sim } from './fixtures.ts';

function pair() {
  const sim = new Sim();
  sim.channel('team', [
    ['sess_a', 'Lead'],
    ['sess_b', 'Reviewer'],
  ]);
  return sim;
}

const commits = (sim: Sim, id: string) => sim.msg(id).transitions.filter(([ev]) => ev === 'COMMIT').length;

describe('fencing of commits and requeues', () => {
  it('a batch swept from p1 and handed to p2: p1 late commit is refused and recorded; p2 commits it once', () => {
    const sim = pair();
    const ids = idsOf(sim.send('sess_a', 'team', 'one'));
    const first = mustPrompt(sim.drain('sess_b'));
    expect(first.attempts).toEqual([1]);
    sim.advance(20_000).run({ op: 'sweep', alive: () => false });
    sim.by = 'p2@other';
    const second = mustPrompt(sim.advance(1000).drain('sess_b'));
    expect(second.attempts).toEqual([2]);

    const late = sim.commit(first, 'push', { by: 'p1@host', attempts: first.attempts });
    expect(late.result).toMatchObject({ ok: false, data: { reason: 'hold_lost', fenced: ids } });
    expect(late.result.message).toMatch(/do not retry/);
    expect(late.changed).toBe(true);
    expect(sim.state.errors.at(-1)).toMatchObject({ reason: 'hold_lost', session_id: 'sess_b' });
    expect(sim.msg(ids[0]!)).toMatchObject({ delivery_status: 'in_flight', in_flight_by: 'p2@other', attempts: 2 });

    expect(dataOf(sim.commit(second)).delivered).toEqual(ids);
    expect(commits(sim, ids[0]!)).toBe(1);
  });

  it('the same tag swept and draining again: the old attempt is fenced (the tag alone is not a hold)', () => {
    const sim = pair();
    const ids = idsOf(sim.send('sess_a', 'team', 'one'));
    const first = mustPrompt(sim.drain('sess_b'));
    sim.run({ op: 'sweep', alive: () => false });
    const second = mustPrompt(sim.advance(1000).drain('sess_b'));
    expect(sim.commit(first).result).toMatchObject({ ok: false, data: { reason: 'hold_lost' } });
    expect(sim.msg(ids[0]!).delivery_status).toBe('in_flight');
    expect(sim.commit(second).result.ok).toBe(true);
    expect(commits(sim, ids[0]!)).toBe(1);
  });

  it('a swept batch still pending: the late commit leaves it queued, in FIFO order, for the next hand-over', () => {
    const sim = pair();
    const ids = [...idsOf(sim.send('sess_a', 'team', 'one')), ...idsOf(sim.send('sess_a', 'team', 'two'))];
    const first = mustPrompt(sim.drain('sess_b'));
    sim.run({ op: 'sweep', alive: () => false });
    expect(sim.commit(first).result).toMatchObject({ ok: false, data: { reason: 'hold_lost', fenced: ids } });
    expect(sim.queue('sess_b')).toEqual(ids);
    expect(ids.map((id) => sim.msg(id).delivery_status)).toEqual(['pending', 'pending']);
  });

  it('a late requeue is fenced too: no retry scheduled, no attempt spent, the new holder keeps its batch', () => {
    const sim = pair();
    const ids = idsOf(sim.send('sess_a', 'team', 'one'));
    const first = mustPrompt(sim.drain('sess_b'));
    sim.run({ op: 'sweep', alive: () => false });
    sim.by = 'p2@other';
    mustPrompt(sim.advance(1000).drain('sess_b'));
    const ch = sim.ch('team');
    const retryBefore = ch.retry_at.sess_b;
    const r = sim.requeue(first, 'late failure', { by: 'p1@host', attempts: first.attempts });
    expect(r.result).toMatchObject({ ok: false, data: { reason: 'hold_lost' } });
    expect(r.effects).toEqual([]);
    expect(sim.ch('team').retry_at.sess_b).toBe(retryBefore);
    expect(sim.msg(ids[0]!)).toMatchObject({ delivery_status: 'in_flight', in_flight_by: 'p2@other', attempts: 2 });
  });

  it('another process cannot settle a batch it never held', () => {
    const sim = pair();
    const ids = idsOf(sim.send('sess_a', 'team', 'one'));
    const p = mustPrompt(sim.drain('sess_b'));
    expect(sim.commit(p, 'push', { by: 'p9@elsewhere', attempts: p.attempts }).result).toMatchObject({
      ok: false,
      data: { reason: 'hold_lost' },
    });
    expect(sim.msg(ids[0]!).delivery_status).toBe('in_flight');
  });

  it('a mixed batch settles what is still held and fences the rest, in one answer', () => {
    const sim = pair();
    const ids = [...idsOf(sim.send('sess_a', 'team', 'one')), ...idsOf(sim.send('sess_a', 'team', 'two'))];
    const p = mustPrompt(sim.drain('sess_b'));
    const wrong = { by: sim.by, attempts: [p.attempts[0]!, p.attempts[1]! + 1] };
    const c = sim.commit(p, 'push', wrong);
    expect(c.result).toMatchObject({ ok: true, data: { delivered: [ids[0]], fenced: [ids[1]] } });
    expect(sim.state.errors.at(-1)?.reason).toBe('hold_lost');
  });

  it('a repeated commit of the same hand-over is a no-op, not a fence', () => {
    const sim = pair();
    idsOf(sim.send('sess_a', 'team', 'one'));
    const p = mustPrompt(sim.drain('sess_b'));
    sim.commit(p);
    const errors = sim.state.errors.length;
    const again = sim.commit(p);
    expect(again.changed).toBe(false);
    expect(dataOf(again).fenced).toEqual([]);
    expect(sim.state.errors.length).toBe(errors);
  });
});
