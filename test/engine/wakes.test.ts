// The wake guard at engine level (protocol.md "Wakes"): the wake chain a reply inherits, the loop
// guard's hold after LOOP_WAKES answered wakes, held mail kept and handed over at a read with the
// hold's notice, the operator's release, wake budgets, and the cost ledger.
import { describe, expect, it } from 'vitest';
import { LOOP_WAKES, REFLEX_MS, WAKE_BUDGET_WINDOW_MS } from '../../src/protocol/limits.ts';
import { endedNotice } from '../../src/engine/wakes.ts';
import { dataOf, idsOf, mustPrompt, promptOf, Sim } from './fixtures.ts';

function pair(args: Record<string, unknown> = {}) {
  const sim = new Sim();
  sim.channel(
    'team',
    [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ],
    args,
  );
  return sim;
}

/** One wake: drain the recipient (a turn OpenComms starts), commit it, and return whether it woke. */
function wake(sim: Sim, rid: string): boolean {
  const p = promptOf(sim.drain(rid));
  if (!p) return false;
  sim.commit(p);
  return true;
}

/** Two agents that answer every wake with a new message a few seconds later. Returns the wakes. */
function politeLoop(sim: Sim, rounds: number, thinkMs = 3_000): string[] {
  const woken: string[] = [];
  sim.send('sess_a', 'team', 'Please review the parser.');
  let [to, from] = ['sess_b', 'sess_a'];
  for (let i = 0; i < rounds; i++) {
    sim.advance(1_100); // past the delivery cooldown
    if (!wake(sim, to)) break;
    woken.push(to);
    sim.advance(thinkMs);
    sim.send(to, 'team', `Noted, standing by (${i}).`);
    [to, from] = [from, to];
  }
  return woken;
}

describe('the loop guard', () => {
  it(`two agents answering every wake within ${REFLEX_MS / 1000} s get ${LOOP_WAKES} wakes, then the next is held`, () => {
    const sim = pair();
    const woken = politeLoop(sim, 20);
    expect(woken).toHaveLength(LOOP_WAKES);
    const held = woken.length % 2 === 0 ? 'sess_b' : 'sess_a';
    expect(sim.ch('team').holds[held]).toBe('loop');
    expect(sim.ch('team').wakes[held]).toMatchObject({ held_by: 'loop' });
    // The held mail is pending, not dropped, refused or failed.
    const pending = sim.envelopesFor(held).filter((e) => e.delivery_status === 'pending');
    expect(pending).toHaveLength(1);
    expect(pending[0]!.wake_chain).toBe(LOOP_WAKES);
    // Later drains (a timer, another send's wake) keep holding it.
    sim.advance(60_000);
    expect(promptOf(sim.drain(held))).toBeUndefined();
  });

  it('a reviewer pair that works 30 s before each reply is never held', () => {
    const sim = pair();
    const woken = politeLoop(sim, 30, 30_000);
    expect(woken).toHaveLength(30);
    expect(Object.values(sim.ch('team').holds)).toEqual([]);
    expect(sim.everything().every((e) => (e.wake_chain ?? 0) === 0)).toBe(true);
  });

  it('held mail is read at the next turn a person starts, once, with one notice line before it', () => {
    const sim = pair();
    politeLoop(sim, 20);
    const held = Object.keys(sim.ch('team').holds)[0]!;
    const r = sim.ok({ op: 'pull', sid: held, args: { channel: 'team' }, method: 'push' });
    const d = dataOf(r) as { messages: Array<{ framed: string }>; notice?: string };
    expect(d.messages).toHaveLength(1);
    expect(d.notice).toMatch(/1 message\(s\) from (Lead|Reviewer), held since \d\d:\d\d UTC by the loop guard/);
    expect(d.notice).toContain('opencomms release team');
    expect(d.notice).not.toContain('[OpenComms] from');
    // The hold ended with the hand-over; a later wake is the machine's usual.
    expect(sim.ch('team').wakes[held]).toMatchObject({ held_by: null, at: null });
    expect(sim.ch('team').holds[held]).toBeUndefined();
    // A reply written at this person-started turn starts a new chain.
    sim.advance(2_000);
    const id = idsOf(sim.send(held, 'team', 'Real content: the parser fails on CRLF.'))[0]!;
    expect(sim.msg(id).wake_chain ?? 0).toBe(0);
  });

  it('new mail that answers no wake (chain 0) wakes a held member, with the notice and all its mail', () => {
    const sim = pair();
    politeLoop(sim, 20);
    const held = Object.keys(sim.ch('team').holds)[0]!;
    const other = held === 'sess_a' ? 'sess_b' : 'sess_a';
    sim.advance(REFLEX_MS + 1);
    sim.send(other, 'team', 'Found a real bug in the lexer.');
    const p = mustPrompt(sim.drain(held));
    expect(p.message_ids).toHaveLength(2);
    expect(p.text.startsWith('(OpenComms: 2 message(s) from')).toBe(true);
    expect(p.text).toContain('held since');
    // A host that frames the batch again from its envelopes (the Codex wake) gets the same notice.
    const batch = p.message_ids.map((id) => sim.msg(id));
    const again = endedNotice(sim.ch('team'), held, batch[0]!.in_flight_at!, batch);
    expect(p.text.startsWith(again!)).toBe(true);
    expect(endedNotice(sim.ch('team'), held, batch[0]!.in_flight_at! - 1, batch)).toBeNull();
  });

  it('the operator releases a hold: the held mail wakes the member, and the loop gets its wakes again', () => {
    const sim = pair();
    politeLoop(sim, 20);
    const held = Object.keys(sim.ch('team').holds)[0]!;
    const r = sim.ok({ op: 'release_wakes', args: { channel: 'team' } });
    expect(dataOf(r)).toMatchObject({ released: [held] });
    expect(r.effects).toEqual([{ type: 'Wake', recipients: [held] }]);
    sim.advance(1_100);
    const p = mustPrompt(sim.drain(held));
    expect(p.text).toContain('by the loop guard');
    sim.refuse({ op: 'release_wakes', args: { channel: 'team', member: 'Nobody' } }, 'target_not_found');
  });
});

describe("a person's turn on a host whose hooks cannot hand mail over (person_turn)", () => {
  it('ends the loop hold: the next wake carries all the held mail with the notice', () => {
    const sim = pair();
    politeLoop(sim, 20);
    const held = Object.keys(sim.ch('team').holds)[0]!;
    expect(dataOf(sim.ok({ op: 'person_turn', session: held }))).toEqual({ released: [held] });
    sim.advance(1_100);
    const p = mustPrompt(sim.drain(held));
    expect(p.text).toMatch(/^\(OpenComms: 1 message\(s\) from \w+, held since .* by the loop guard/);
    // Nothing held: nothing changes.
    const again = sim.run({ op: 'person_turn', session: held });
    expect(again.changed).toBe(false);
  });
});

describe('wake budgets', () => {
  it('a member past its budget is held until the window frees a wake; its mail waits', () => {
    const sim = pair({ max_wakes_per_member: 2 });
    expect(sim.ch('team').budgets).toMatchObject({ max_wakes_per_member: 2, max_wakes_per_channel: 240 });
    for (let i = 0; i < 2; i++) {
      sim.send('sess_a', 'team', `work item ${i}`);
      sim.advance(1_100);
      expect(wake(sim, 'sess_b')).toBe(true);
      sim.advance(60_000); // answers no wake: a budget, not the loop guard, holds
    }
    sim.send('sess_a', 'team', 'work item 2');
    sim.advance(1_100);
    const d = sim.drain('sess_b');
    expect(promptOf(d)).toBeUndefined();
    expect(sim.ch('team').holds.sess_b).toBe('wake_budget');
    const first = sim.ch('team').wakes.sess_b!.starts[0]!;
    expect(d.effects).toContainEqual({ type: 'ScheduleAt', recipient: 'sess_b', at: first + WAKE_BUDGET_WINDOW_MS });
    sim.now = first + WAKE_BUDGET_WINDOW_MS;
    const p = mustPrompt(sim.drain('sess_b'));
    expect(p.text).toContain('by the wake budget of channel "team"');
  });

  it("the operator sets a live channel's budgets; null is none", () => {
    const sim = pair();
    sim.ok({ op: 'set_wake_budget', args: { channel: 'team', max_wakes_per_member: null, max_wakes_per_channel: 10 } });
    expect(sim.ch('team').budgets).toMatchObject({ max_wakes_per_member: null, max_wakes_per_channel: 10 });
    sim.refuse({ op: 'set_wake_budget', args: { channel: 'team' } }, 'invalid_argument');
    sim.refuse({ op: 'set_wake_budget', args: { channel: 'team', max_wakes_per_member: 'many' } }, 'invalid_argument');
  });
});

describe('the cost ledger', () => {
  it('counts wakes by route, held turns, messages and characters handed over, per member', () => {
    const sim = pair();
    const woken = politeLoop(sim, 20);
    const usage = sim.ch('team').usage;
    const wakes = Object.values(usage).reduce((n, u) => n + u.total.wakes, 0);
    expect(wakes).toBe(woken.length);
    expect(usage.sess_b!.total.routes).toEqual({ 'host-push/push': woken.filter((w) => w === 'sess_b').length });
    const held = Object.keys(sim.ch('team').holds)[0]!;
    expect(usage[held]!.total.held).toBe(1);
    const messages = Object.values(usage).reduce((n, u) => n + u.total.messages, 0);
    expect(messages).toBe(woken.length);
    expect(usage.sess_b!.total.size).toBeGreaterThan(0);
    expect(Object.keys(usage.sess_b!.buckets).length).toBeGreaterThan(0);
  });
});
