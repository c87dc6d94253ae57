// The pure diff behind `opencomms watch`: envelope lines from receipts (with their own times),
// terminal envelopes found in the history log, mail that appeared and settled between two looks,
// purges on save/delete, recipient and member lines, and a bounded memory of what was reported.
import { describe, expect, it } from 'vitest';
import { diff, emptySeen, leaseLines, renderLine, type Seen, type WatchLine } from '../../../src/cli/watch/diff.ts';
import { idsOf, mustPrompt, operatorActor, Sim } from '../../engine/fixtures.ts';
import { WakeLineSchema } from '../../../src/protocol/schema.ts';

/** A watcher over a Sim: each look() reads the state and, like the shell, the log tails. */
function watcher(sim: Sim) {
  const all = () => new Set(Object.values(sim.state.channels).map((c) => c.id));
  const tails = () => [...all()].flatMap((id) => sim.logged(id).slice(0, 50));
  let seen: Seen = diff(emptySeen(), sim.state, tails(), all(), sim.now, true).seen;
  return {
    look(): WatchLine[] {
      const r = diff(seen, structuredClone(sim.state), tails(), all(), sim.now);
      seen = r.seen;
      return r.lines;
    },
    get seen() {
      return seen;
    },
  };
}
const moves = (lines: WatchLine[]) =>
  lines.map((l) =>
    l.kind === 'envelope'
      ? `${l.message_id.slice(-2)} ${l.event} ${l.from ?? '∅'}→${l.to}`
      : l.kind === 'recipient'
        ? `${l.role} ${l.from ?? '∅'}→${l.to}`
        : l.kind === 'wake'
          ? l.woken
            ? `wake ${l.role} woken (${l.wakes})`
            : `wake ${l.role} ${l.from ?? '∅'}→${l.to ?? '∅'}`
          : `pid ${l.pid} ${l.from ?? '∅'}→${l.to}`,
  );

function team() {
  const sim = new Sim();
  sim.channel(
    'team',
    [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
      ['sess_c', 'Reader', 'pull'],
    ],
    { rate_limit: 100 },
  );
  return sim;
}

describe('envelope lines', () => {
  it('report each transition once, with the receipt time, through to a terminal state that left state.json', () => {
    const sim = team();
    const w = watcher(sim);
    expect(w.look()).toEqual([]);
    const [id] = idsOf(sim.send('sess_a', 'team', 'hello', { to: 'Reviewer' }));
    const sentAt = sim.now;
    const sent = w.look();
    expect(sent.filter((l) => l.kind === 'envelope')).toEqual([
      {
        kind: 'envelope',
        at: sentAt,
        channel: 'team',
        message_id: id,
        sender_role: 'Lead',
        recipient_role: 'Reviewer',
        event: 'SEND',
        from: null,
        to: 'pending',
        attempt: 0,
      },
    ]);
    sim.advance(10);
    const p = mustPrompt(sim.drain('sess_b'));
    expect(moves(w.look())).toEqual([
      `${id!.slice(-2)} DRAIN pending→in_flight`,
      'wake Reviewer woken (1)',
      'Reviewer ready→delivering',
    ]);
    sim.advance(5);
    sim.commit(p);
    expect(sim.hot(id!)).toBeUndefined();
    const done = w.look();
    expect(done[0]).toMatchObject({
      kind: 'envelope',
      event: 'COMMIT',
      from: 'in_flight',
      to: 'delivered',
      at: sim.now,
      attempt: 1,
    });
    expect(moves(done)).toEqual([`${id!.slice(-2)} COMMIT in_flight→delivered`, 'Reviewer delivering→cooling']);
    // Nothing is reported twice.
    expect(w.look()).toEqual([]);
  });

  it('mail that was sent and pulled between two looks is reported from the log tail, in order', () => {
    const sim = team();
    const w = watcher(sim);
    const [id] = idsOf(sim.send('sess_a', 'team', 'for the reader', { to: 'Reader' }));
    sim.advance(3);
    sim.ok({ op: 'pull', sid: 'sess_c', args: {} });
    const lines = w.look().filter((l) => l.kind === 'envelope');
    expect(moves(lines)).toEqual([`${id!.slice(-2)} SEND ∅→pending`, `${id!.slice(-2)} PULL pending→delivered`]);
    expect(lines[1]!.at - lines[0]!.at).toBe(3);
  });

  it('a save purges live mail as archived, a delete as discarded; old history is never re-reported', () => {
    const sim = team();
    sim.send('sess_a', 'team', 'earlier', { to: 'Reader' });
    sim.ok({ op: 'pull', sid: 'sess_c', args: {} });
    const w = watcher(sim);
    const [pending] = idsOf(sim.send('sess_a', 'team', 'still pending', { to: 'Reviewer' }));
    w.look();
    sim.ok({ op: 'save_session', actor: operatorActor(), args: { channel: 'team' } });
    const saved = w.look();
    expect(saved.filter((l) => l.kind === 'envelope')).toMatchObject([
      { message_id: pending, event: 'PURGE', from: 'pending', to: 'archived' },
    ]);
    expect(moves(saved.filter((l) => l.kind === 'recipient'))).toEqual([
      'Lead ready→removed',
      'Reviewer ready→removed',
      'Reader ready→removed',
    ]);

    const sim2 = team();
    const w2 = watcher(sim2);
    const [x] = idsOf(sim2.send('sess_a', 'team', 'x', { to: 'Reviewer' }));
    w2.look();
    sim2.ok({ op: 'delete_session', actor: operatorActor(), args: { channel: 'team', confirm: true }, archive: null });
    expect(w2.look().filter((l) => l.kind === 'envelope')).toMatchObject([
      { message_id: x, event: 'PURGE', to: 'discarded' },
    ]);
  });

  it('forgets terminal envelopes that left the log tail it read (bounded memory)', () => {
    const sim = team();
    const w = watcher(sim);
    for (let i = 0; i < 60; i++) {
      sim.send('sess_a', 'team', `m${i}`, { to: 'Reader' });
      sim.advance(1);
    }
    sim.ok({ op: 'pull', sid: 'sess_c', args: { limit: 100 } });
    w.look();
    expect(w.seen.receipts.size).toBeLessThanOrEqual(50);
  });
});

describe('recipient and member lines', () => {
  it('paused, stale, joined and removed members; a cooldown ending on time alone', () => {
    const sim = team();
    const w = watcher(sim);
    sim.send('sess_a', 'team', 'x', { to: 'Reviewer' });
    w.look();
    sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    expect(moves(w.look())).toEqual(['Reviewer ready→blocked:paused']);
    sim.ok({ op: 'resume', sid: 'sess_a', args: { channel: 'team' } });
    sim.commit(mustPrompt(sim.drain('sess_b')));
    expect(moves(w.look()).filter((m) => m.startsWith('Reviewer'))).toEqual(['Reviewer blocked:paused→cooling']);
    sim.advance(1001);
    expect(moves(w.look())).toEqual(['Reviewer cooling→ready']);
    sim.ok({ op: 'mark_stale', session: 'sess_c' });
    expect(moves(w.look())).toEqual(['Reader ready→stale']);
    sim.join('sess_d', 'team', 'Newcomer');
    expect(moves(w.look())).toEqual(['Newcomer ∅→ready']);
    sim.ok({ op: 'kick', caller: { operator: true }, args: { channel: 'team', target_role: 'Newcomer' } });
    const kicked = moves(w.look());
    expect(kicked).toContain('Newcomer ready→removed');
  });
});

describe('wake lines', () => {
  /** The wake guard's fields as the engine writes them: a member's wake line and its hold. */
  const hold = (sim: Sim, sid: string, held_by: 'loop' | 'wake_budget' | null) => {
    const ch = sim.ch('team') as ReturnType<Sim['ch']> & { wakes?: Record<string, unknown> };
    ch.wakes ??= {};
    ch.wakes[sid] = WakeLineSchema.parse({
      at: null,
      chain: 6,
      base: 0,
      starts: [],
      held_by,
      held_since: held_by ? sim.now : null,
      held_newest: null,
    });
    if (held_by) ch.holds[sid] = held_by;
    else delete ch.holds[sid];
  };

  it('the loop guard holding a ping-pong pair, and the release the operator gives, as the engine records them', () => {
    const sim = team();
    const w = watcher(sim);
    const lines: WatchLine[] = [];
    for (let i = 0; i < 10; i++) {
      const [from, to, rid] = i % 2 ? ['sess_b', 'Lead', 'sess_a'] : ['sess_a', 'Reviewer', 'sess_b'];
      sim.send(from!, 'team', `answer ${i}`, { to });
      sim.advance(2_000);
      const p = sim.drain(rid!).effects.find((e) => e.type === 'Prompt');
      if (p) sim.commit(p as Parameters<Sim['commit']>[0]);
      sim.advance(2_000);
      lines.push(...w.look());
    }
    // Six wakes (three each), then the seventh held; the script's later sends as Reviewer (no
    // turn of its own started them) still wake Lead.
    expect(lines.filter((l) => l.kind === 'wake').map((l) => moves([l])[0])).toEqual([
      'wake Reviewer woken (1)',
      'wake Lead woken (1)',
      'wake Reviewer woken (2)',
      'wake Lead woken (2)',
      'wake Reviewer woken (3)',
      'wake Lead woken (3)',
      'wake Reviewer ∅→loop',
      'wake Lead woken (4)',
      'wake Lead woken (5)',
    ]);
    sim.ok({ op: 'release_wakes', args: { channel: 'team' } });
    const p = sim.drain('sess_b').effects.find((e) => e.type === 'Prompt');
    if (p) sim.commit(p as Parameters<Sim['commit']>[0]);
    expect(moves(w.look()).filter((m) => m.startsWith('wake'))).toEqual([
      'wake Reviewer woken (4)',
      'wake Reviewer loop→∅',
    ]);
  });

  it("a member's wakes held by the loop guard, moved to the wake budget, released; one line each", () => {
    const sim = team();
    const w = watcher(sim);
    sim.advance(10);
    const heldAt = sim.now;
    hold(sim, 'sess_b', 'loop');
    const held = w.look().filter((l) => l.kind === 'wake');
    expect(held).toEqual([
      {
        kind: 'wake',
        at: heldAt,
        channel: 'team',
        session_id: 'sess_b',
        role: 'Reviewer',
        from: null,
        to: 'loop',
        wakes: 0,
        tokens_estimate: 0,
      },
    ]);
    expect(w.look()).toEqual([]);
    sim.advance(10);
    hold(sim, 'sess_b', 'wake_budget');
    expect(moves(w.look())).toEqual(['wake Reviewer loop→wake_budget']);
    sim.advance(10);
    hold(sim, 'sess_b', null);
    const released = w.look();
    expect(moves(released)).toEqual(['wake Reviewer wake_budget→∅']);
    expect(released[0]!.at).toBe(sim.now);
  });

  it('a hold there before watch started is not reported; a member that leaves held gets its removed line only', () => {
    const sim = team();
    hold(sim, 'sess_b', 'loop');
    const w = watcher(sim);
    expect(w.look()).toEqual([]);
    sim.ok({ op: 'kick', caller: { operator: true }, args: { channel: 'team', target_role: 'Reviewer' } });
    expect(moves(w.look()).filter((m) => m.includes('Reviewer'))).toEqual(['Reviewer ready→removed']);
  });
});

describe('renderLine', () => {
  it('prints one kubectl-style line per transition', () => {
    const at = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    expect(
      renderLine({
        kind: 'envelope',
        at,
        channel: 'team',
        message_id: 'ocm_0123456789abcdef',
        sender_role: 'Lead',
        recipient_role: 'Reviewer',
        event: 'DRAIN',
        from: 'pending',
        to: 'in_flight',
        attempt: 2,
      }),
    ).toBe('03:04:05.678  team  envelope   ocm_01234567…  Lead → Reviewer  pending → in_flight (DRAIN, attempt 2)');
    expect(
      renderLine({
        kind: 'envelope',
        at,
        channel: 'team',
        message_id: 'ocm_0123456789abcdef',
        sender_role: 'Lead',
        recipient_role: 'Reviewer',
        event: 'SEND',
        from: null,
        to: 'pending',
        attempt: 0,
      }),
    ).toBe('03:04:05.678  team  envelope   ocm_01234567…  Lead → Reviewer  SEND → pending');
    expect(
      renderLine({
        kind: 'recipient',
        at,
        channel: 'team',
        session_id: 'sess_bbbbbbbbbbbbbbbb',
        role: 'Reviewer',
        from: 'ready',
        to: 'blocked:paused',
        machine: '1a2b3c4d-0000-4000-8000-000000000000',
      }),
    ).toBe('03:04:05.678  team  recipient  Reviewer (sess_bbbbbbb) on 1a2b3c4d  ready → blocked:paused');
    const wake = {
      kind: 'wake',
      at,
      channel: 'team',
      session_id: 'sess_bbbbbbbbbbbbbbbb',
      role: 'Reviewer',
      wakes: 3,
      tokens_estimate: 420,
    } as const;
    const cost = '3 wake(s) since the channel began, ~420 tokens handed over (estimate)';
    expect(renderLine({ ...wake, from: null, to: null, woken: true })).toBe(
      `03:04:05.678  team  wake       woken: Reviewer (sess_bbbbbbb); ${cost}`,
    );
    expect(renderLine({ ...wake, from: null, to: 'loop' })).toBe(
      `03:04:05.678  team  wake       held: Reviewer (sess_bbbbbbb) by the loop guard; ${cost}`,
    );
    expect(renderLine({ ...wake, from: 'loop', to: 'wake_budget' })).toBe(
      `03:04:05.678  team  wake       held: Reviewer (sess_bbbbbbb) by the wake budget (was held by the loop guard); ${cost}`,
    );
    expect(renderLine({ ...wake, from: 'wake_budget', to: null })).toBe(
      '03:04:05.678  team  wake       released: Reviewer (sess_bbbbbbb) (was held by the wake budget)',
    );
    expect(
      renderLine({
        kind: 'process',
        at,
        process: '4242@evil\u001b[2Jhost/1a2b3c4d-0000-4000-8000-000000000000',
        pid: 4242,
        machine: '1a2b3c4d-0000-4000-8000-000000000000',
        from: 'holds',
        to: 'expired',
      }),
    ).toBe('03:04:05.678  -  process    pid 4242 on 1a2b3c4d  holds → expired');
  });
});

describe('process lines', () => {
  const M = '1a2b3c4d-0000-4000-8000-000000000000';
  const view = (rows: Record<string, number>) => ({
    live: new Set(Object.keys(rows).filter((t) => rows[t]! > 0)),
    left: new Map(Object.entries(rows)),
  });
  it('a lease that appears, runs out and goes is one line each; an unchanged one is none', () => {
    const [a, b] = [`1@x/${M}`, `2@y/${M}`];
    const first = leaseLines(new Map(), view({ [a]: 5_000 }), 1);
    expect(moves(first.lines)).toEqual(['pid 1 ∅→holds']);
    const same = leaseLines(first.seen, view({ [a]: 100 }), 2);
    expect(same.lines).toEqual([]);
    const later = leaseLines(same.seen, view({ [a]: -10, [b]: 5_000 }), 3);
    expect(moves(later.lines)).toEqual(['pid 1 holds→expired', 'pid 2 ∅→holds']);
    expect(later.lines[0]).toMatchObject({ kind: 'process', at: 3, process: a, machine: M });
    expect(moves(leaseLines(later.seen, view({ [b]: 5_000 }), 4).lines)).toEqual(['pid 1 expired→gone']);
  });
});
