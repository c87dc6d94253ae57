// The wake simulation (issue 41, item 7; protocol.md "Wakes"): scripted agents through the REAL
// runtime and stores (files and PostgreSQL), on a virtual clock (world.ts), so that hours of agent
// time run in well under a second. A wake is a hand-over through the push driver; a person turn is
// a pull with method 'push' (a hook's boundary). Every scenario checks the wake count, and that
// every message reaches its recipient exactly once, in the order it was sent (0 lost, 0
// duplicated, FIFO per recipient) once the held members' next person turns have read their mail.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { openRuntime } from '../../src/runtime/runtime.ts';
import {
  DEFAULT_WAKES_PER_MEMBER,
  LOOP_WAKES,
  REFLEX_MS,
  STALE_EVENT_MS,
  WAKE_BUDGET_WINDOW_MS,
} from '../../src/protocol/limits.ts';
import { start as startProcess, type Proc } from '../helpers/process.ts';
import { audit, freshProject, ledgerWakes, setUp, World, type Agent, type StoreKind } from './world.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const worker = new URL('./loop-worker.ts', import.meta.url).pathname;

/** Open worlds and projects, closed and removed after each test. */
const open: Array<() => Promise<void>> = [];
const children: Proc[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) await c.stop('SIGKILL');
  for (const f of open.splice(0).reverse()) await f();
});

async function world(kind: StoreKind, t0 = Date.now()) {
  const p = await freshProject(kind);
  open.push(p.cleanup);
  const w = new World(p.dir, t0).open();
  open.push(() => w.close());
  return w;
}

/** Another world (a new runtime: another process's) on the same project. */
function again(w: World, t: number) {
  const next = new World(w.dir, t).open();
  open.push(() => next.close()); // closed before the project is removed
  return next;
}

let counter = 0;
const unique = (s: string) => `${s} #${++counter}`;

/** Answers every wake with a new message to `to` (or a broadcast) `think` ms later. */
const answering =
  (channel: string, think: number, to?: string | 'broadcast', say = 'Noted, standing by.'): Agent =>
  () => [
    {
      after: think,
      args: { channel, content: unique(say), ...(to === 'broadcast' ? { broadcast: true } : to ? { to } : {}) },
    },
  ];

/** A held member's next person turn and the checks every hand-over of held mail passes. */
async function personTurnOfHeld(w: World, sid: string, by: 'loop' | 'wake_budget') {
  const pending = (await w.state()).queues[sid]?.length ?? 0;
  expect(pending).toBeGreaterThan(0);
  const turn = await w.personTurn(sid);
  expect(turn.ids).toHaveLength(pending);
  expect(turn.notice).toMatch(
    by === 'loop'
      ? /^\(OpenComms: \d+ message\(s\) from .+, held since \d\d:\d\d UTC by the loop guard/
      : /^\(OpenComms: \d+ message\(s\) from .+, held since \d\d:\d\d UTC by the wake budget of channel/,
  );
  const ch = Object.values((await w.state()).channels)[0]!;
  expect(ch.wakes[sid]).toMatchObject({ held_by: null, at: null });
  expect(ch.holds[sid]).toBeUndefined();
}

/** Person turns for everyone, then the three delivery checks. */
async function settleAndAudit(w: World, members: string[]) {
  for (const m of members) if ((await w.state()).queues[m]?.length) await w.personTurn(m);
  expect(audit(w)).toEqual({ lost: [], duplicated: [], outOfOrder: [] });
  const state = await w.state();
  for (const m of members) expect(state.queues[m] ?? []).toEqual([]);
}

/** The ledger's wakes match the driver's, per member; no wake started past the loop guard's
 *  chain (no release in these scripts: every base is 0). */
async function ledgerMatches(w: World, channel: string) {
  for (const x of w.wakes) expect(x.chain, `${x.rid} woken at chain ${x.chain}`).toBeLessThan(LOOP_WAKES);
  const l = ledgerWakes(await w.channel(channel));
  expect(l.total).toBe(w.wakes.length);
  for (const [rid, n] of Object.entries(l.per)) expect(n, rid).toBe(w.wakesOf(rid));
  return l;
}

describe.each<StoreKind>(['file', 'postgres'])('the wake guard on the %s store', (kind) => {
  it(`polite acknowledgers (2 s a reply) get ${LOOP_WAKES} wakes, then held; a person turn reads it all once, in order, with the notice`, async () => {
    const w = await world(kind);
    await setUp(w, 'team', [
      ['a', 'Lead'],
      ['b', 'Reviewer'],
    ]);
    w.agents.set('a', answering('team', 2_000));
    w.agents.set('b', answering('team', 2_000));
    await w.send('a', { channel: 'team', content: 'Please review the parser.' });
    await w.run({ for: 30 * MINUTE });
    expect(w.wakes).toHaveLength(LOOP_WAKES);
    expect(w.wakes.map((x) => x.rid)).toEqual(['b', 'a', 'b', 'a', 'b', 'a']);
    expect(w.busy).toBe(false);
    const ch = await w.channel('team');
    expect(ch.holds).toEqual({ b: 'loop' });
    expect(ch.wakes.b).toMatchObject({ held_by: 'loop' });
    const l = await ledgerMatches(w, 'team');
    expect(l.held).toBe(1);
    expect(w.refusals).toEqual([]);
    await personTurnOfHeld(w, 'b', 'loop');
    await settleAndAudit(w, ['a', 'b']);
    // A reply written at the person's turn answers no wake: it wakes the peer with chain 0, and
    // the acknowledgers (still answering in 2 s) get a new run of LOOP_WAKES wakes, no more.
    await w.send('b', { channel: 'team', content: 'Real finding: the lexer drops CRLF.' });
    await w.run({ for: 30 * MINUTE });
    expect(w.wakes.slice(LOOP_WAKES).map((x) => [x.rid, x.chain])).toEqual([
      ['a', 0],
      ['b', 1],
      ['a', 2],
      ['b', 3],
      ['a', 4],
      ['b', 5],
    ]);
    expect((await w.channel('team')).holds).toEqual({ a: 'loop' });
    await ledgerMatches(w, 'team');
    await personTurnOfHeld(w, 'a', 'loop');
    await settleAndAudit(w, ['a', 'b']);
  });

  it('the operator releases a hold: the owner wakes the held member at once, its batch led by the notice', async () => {
    const w = await world(kind);
    await setUp(w, 'team', [
      ['a', 'Lead'],
      ['b', 'Reviewer'],
    ]);
    w.agents.set('a', answering('team', 2_000));
    w.agents.set('b', answering('team', 2_000));
    await w.send('a', { channel: 'team', content: 'Please review the parser.' });
    await w.run({ for: 10 * MINUTE });
    expect((await w.channel('team')).holds).toEqual({ b: 'loop' });
    // The turn the release wakes says nothing more.
    w.agents.set('b', () => []);
    const r = await w.rt.run({ op: 'release_wakes', args: { channel: 'team' } });
    expect(r.data).toMatchObject({ released: ['b'] });
    await w.run({ for: MINUTE });
    expect(w.wakes).toHaveLength(LOOP_WAKES + 1);
    const released = w.wakes.at(-1)!;
    expect(released.rid).toBe('b');
    expect(released.text).toMatch(/^\(OpenComms: 1 message\(s\) from Lead, held since \d\d:\d\d UTC by the loop guard/);
    expect((await w.channel('team')).holds).toEqual({});
    // The released wake's chain is the held mail's (LOOP_WAKES), over the base the release raised.
    expect(released.chain).toBe(LOOP_WAKES);
    expect((await w.channel('team')).wakes.b).toMatchObject({ base: LOOP_WAKES, held_by: null });
    expect(ledgerWakes(await w.channel('team')).total).toBe(w.wakes.length);
    await settleAndAudit(w, ['a', 'b']);
  });

  it('an echo pair: an exact echo is a duplicate at the third message; a quoting echo is held after 6 wakes', async () => {
    const w = await world(kind);
    await setUp(w, 'echo', [
      ['a', 'Left'],
      ['b', 'Right'],
    ]);
    const echo: Agent = (turn) => turn.contents.map((c) => ({ after: 1_500, args: { channel: 'echo', content: c } }));
    w.agents.set('a', echo);
    w.agents.set('b', echo);
    await w.send('a', { channel: 'echo', content: 'ping' });
    await w.run({ for: 10 * MINUTE });
    // b echoes "ping"; a's echo of it is its own "ping" again, inside the duplicate window.
    expect(w.wakes.map((x) => x.rid)).toEqual(['b', 'a']);
    expect(w.refusals.map((r) => [r.sid, r.reason])).toEqual([['a', 'duplicate_content']]);
    await settleAndAudit(w, ['a', 'b']);
    await ledgerMatches(w, 'echo');

    // Echoes that quote what they got are new content each time: the loop guard bounds them.
    const q = await world(kind);
    await setUp(q, 'echo', [
      ['a', 'Left'],
      ['b', 'Right'],
    ]);
    const quote: Agent = (turn) => [
      { after: 1_500, args: { channel: 'echo', content: `> ${turn.contents.join('\n> ')}` } },
    ];
    q.agents.set('a', quote);
    q.agents.set('b', quote);
    await q.send('a', { channel: 'echo', content: 'ping' });
    await q.run({ for: 30 * MINUTE });
    expect(q.wakes).toHaveLength(LOOP_WAKES);
    expect(q.refusals).toEqual([]);
    const held = Object.keys((await q.channel('echo')).holds);
    expect(held).toEqual(['b']);
    await ledgerMatches(q, 'echo');
    await personTurnOfHeld(q, 'b', 'loop');
    await settleAndAudit(q, ['a', 'b']);
  });

  it(`a ring of three (A→B→C→A) gets ${LOOP_WAKES} wakes, then held`, async () => {
    const w = await world(kind);
    await setUp(w, 'ring', [
      ['a', 'A'],
      ['b', 'B'],
      ['c', 'C'],
    ]);
    w.agents.set('a', answering('ring', 2_500, 'b', 'Passing it on'));
    w.agents.set('b', answering('ring', 2_500, 'c', 'Passing it on'));
    w.agents.set('c', answering('ring', 2_500, 'a', 'Passing it on'));
    await w.send('a', { channel: 'ring', content: 'Round we go.', to: 'b' });
    await w.run({ for: 30 * MINUTE });
    expect(w.wakes.map((x) => x.rid)).toEqual(['b', 'c', 'a', 'b', 'c', 'a']);
    expect((await w.channel('ring')).holds).toEqual({ b: 'loop' });
    await ledgerMatches(w, 'ring');
    await personTurnOfHeld(w, 'b', 'loop');
    await settleAndAudit(w, ['a', 'b', 'c']);
  });

  it("a broadcast storm among five: no wake past the loop guard's chain, every member held, 0 lost", async () => {
    const w = await world(kind);
    const five = ['a', 'b', 'c', 'd', 'e'];
    // A rate limit out of the way: the wake guard, not the send rate, is what stops the storm.
    await setUp(
      w,
      'storm',
      five.map((s) => [s, s.toUpperCase()]),
      { rate_limit: 1000 },
    );
    five.forEach((s, i) => {
      w.agents.set(s, answering('storm', 1_500 + i * 300, 'broadcast', `${s}: ack`));
    });
    await w.send('a', { channel: 'storm', content: 'Kick-off: everyone report.', broadcast: true });
    await w.run({ for: 2 * HOUR });
    const ch = await w.channel('storm');
    expect(Object.values(ch.holds).sort()).toEqual(five.map(() => 'loop'));
    // The guard counts wakes in a row by chain, not per member: a member is woken again at a chain
    // it already had when a slower peer's answer of that chain comes in after its wake. So a
    // member of a storm of five gets more than LOOP_WAKES wakes (7 or 8 in this script), all with
    // a chain below LOOP_WAKES; the member budget (60 an hour) is the per-member bound.
    for (const x of w.wakes) expect(x.chain).toBeLessThan(LOOP_WAKES);
    for (const s of five) expect(w.wakesOf(s), s).toBeLessThanOrEqual(LOOP_WAKES + 2);
    expect(w.wakes.length).toBe(38);
    // The storm ended within a minute of agent time and never started again.
    expect(w.wakes.at(-1)!.at - w.wakes[0]!.at).toBeLessThan(MINUTE);
    expect(w.busy).toBe(false);
    await ledgerMatches(w, 'storm');
    for (const s of five) await personTurnOfHeld(w, s, 'loop');
    await settleAndAudit(w, five);
  });

  it('a broadcast storm among five with max_wakes_per_member 2: the budget holds, frees a wake per hour slot, 0 lost', async () => {
    const w = await world(kind);
    const five = ['a', 'b', 'c', 'd', 'e'];
    await setUp(
      w,
      'storm',
      five.map((s) => [s, s.toUpperCase()]),
      { rate_limit: 1000, max_wakes_per_member: 2 },
    );
    five.forEach((s, i) => {
      w.agents.set(s, answering('storm', 1_500 + i * 300, 'broadcast', `${s}: ack`));
    });
    const t0 = w.t;
    await w.send('a', { channel: 'storm', content: 'Kick-off: everyone report.', broadcast: true });
    await w.run({ for: 50 * MINUTE });
    let ch = await w.channel('storm');
    expect(ch.budgets.max_wakes_per_member).toBe(2);
    expect(Object.values(ch.holds).sort()).toEqual(five.map(() => 'wake_budget'));
    for (const s of five) expect(w.wakesOf(s), s).toBe(2);
    // Held mail outlives the push stale window (5 min): still pending, not stale.
    expect(w.t - t0).toBeGreaterThan(STALE_EVENT_MS);
    // The hour frees the first starts: the budget's own timer wakes the members again.
    const before = w.wakes.length;
    await w.run({ for: 3 * HOUR });
    expect(w.wakes.length).toBeGreaterThan(before);
    // Never more than 2 wakes of one member in any hour (the rolling window).
    for (const s of five) {
      const at = w.wakes.filter((x) => x.rid === s).map((x) => x.at);
      for (let i = 2; i < at.length; i++) expect(at[i]! - at[i - 2]!, s).toBeGreaterThanOrEqual(WAKE_BUDGET_WINDOW_MS);
    }
    ch = await w.channel('storm');
    await ledgerMatches(w, 'storm');
    for (const [s, by] of Object.entries(ch.holds)) await personTurnOfHeld(w, s, by as 'loop' | 'wake_budget');
    await settleAndAudit(w, five);
  });

  it('an agent that messages itself is refused (recipient_not_found, or no_recipient alone) and nothing wakes', async () => {
    const w = await world(kind);
    await setUp(w, 'solo', [['a', 'Lone']]);
    await setUp(w, 'duo', [
      ['b', 'Self'],
      ['c', 'Peer'],
    ]);
    w.agents.set('a', answering('solo', 1_000));
    w.agents.set('b', answering('duo', 1_000, 'b'));
    w.agents.set('c', answering('duo', 1_000, 'c'));
    await w.send('a', { channel: 'solo', content: 'Note to self.' });
    await w.send('a', { channel: 'solo', content: 'Note to self, broadcast.', broadcast: true });
    await w.send('b', { channel: 'duo', content: 'Note to self.', to: 'b' });
    await w.send('b', { channel: 'duo', content: 'Note to my role.', to: 'Self' });
    await w.run({ for: 10 * MINUTE });
    expect(w.refusals.map((r) => [r.sid, r.reason])).toEqual([
      ['a', 'no_recipient'],
      ['a', 'no_recipient'],
      ['b', 'recipient_not_found'],
      ['b', 'recipient_not_found'],
    ]);
    expect(w.wakes).toEqual([]);
    const state = await w.state();
    expect(Object.keys(state.messages)).toEqual([]);
    expect(state.channels.duo!.usage).toEqual({});
    expect(state.channels.duo!.wakes).toEqual({});
  });

  it('a genuine reviewer pair (30–120 s of work between replies, real content) is never held', async () => {
    const w = await world(kind);
    await setUp(w, 'review', [
      ['a', 'Author'],
      ['b', 'Reviewer'],
    ]);
    // A fixed sequence of think times in 30–120 s (deterministic, spread over the range).
    let k = 0;
    const think = () => 30_000 + ((k++ * 37_813) % 90_001);
    const rounds = 60;
    let replies = 0;
    const reviewer =
      (what: string): Agent =>
      (turn) =>
        replies++ < rounds
          ? [
              {
                after: think(),
                args: {
                  channel: 'review',
                  content: `${what} ${replies}: re ${turn.contents.length} message(s); diff of ${100 + replies * 7} lines.`,
                },
              },
            ]
          : [];
    w.agents.set('a', reviewer('Revision'));
    w.agents.set('b', reviewer('Review'));
    await w.send('a', { channel: 'review', content: 'Please review PR 12: the parser rewrite.' });
    await w.run({ for: 4 * HOUR });
    expect(w.wakes).toHaveLength(rounds + 1);
    expect(w.wakes.at(-1)!.at - w.wakes[0]!.at).toBeGreaterThan(HOUR); // the budget's rolling window was crossed
    const ch = await w.channel('review');
    expect(ch.holds).toEqual({});
    expect(Object.values(ch.wakes).every((l) => l.held_by === null)).toBe(true);
    expect(ledgerWakes(ch).held).toBe(0);
    for (const s of ['a', 'b']) expect(w.wakesOf(s)).toBeLessThanOrEqual(DEFAULT_WAKES_PER_MEMBER);
    await ledgerMatches(w, 'review');
    await settleAndAudit(w, ['a', 'b']);
    expect(w.pulls.every((p) => p.ids.length === 0)).toBe(true);
  });

  it('property: random think times, targets and person turns: 0 lost, 0 duplicated, FIFO, ledger wakes = driver wakes', async () => {
    const script = fc.record({
      think: fc.array(fc.integer({ min: 300, max: 150_000 }), { minLength: 1, maxLength: 6 }),
      target: fc.constantFrom<'sender' | 'next' | 'broadcast'>('sender', 'next', 'broadcast'),
      replies: fc.integer({ min: 0, max: 10 }),
    });
    const scenario = fc.record({
      members: fc.integer({ min: 2, max: 4 }),
      scripts: fc.array(script, { minLength: 4, maxLength: 4 }),
      kicks: fc.array(fc.record({ from: fc.nat(3), at: fc.integer({ min: 0, max: 5 * MINUTE }) }), {
        minLength: 1,
        maxLength: 3,
      }),
      persons: fc.array(fc.record({ who: fc.nat(3), at: fc.integer({ min: 0, max: 40 * MINUTE }) }), { maxLength: 3 }),
      budget: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const p = await freshProject(kind);
        const w = new World(p.dir, Date.now()).open();
        try {
          const ids = ['a', 'b', 'c', 'd'].slice(0, s.members);
          await setUp(
            w,
            'prop',
            ids.map((x) => [x, x.toUpperCase()]),
            s.budget === undefined ? {} : { max_wakes_per_member: s.budget },
          );
          ids.forEach((me, i) => {
            const sc = s.scripts[i]!;
            let n = 0;
            w.agents.set(me, (turn) => {
              if (n >= sc.replies) return [];
              const to =
                sc.target === 'broadcast'
                  ? { broadcast: true }
                  : { to: sc.target === 'sender' ? turn.senders.at(-1)! : ids[(i + 1) % ids.length]! };
              return [
                { after: sc.think[n++ % sc.think.length]!, args: { channel: 'prop', content: unique(me), ...to } },
              ];
            });
          });
          for (const k of s.kicks) {
            const from = ids[k.from % ids.length]!;
            w.later(k.at, () =>
              w.send(from, { channel: 'prop', content: unique(`${from} kicks off`), broadcast: true }),
            );
          }
          for (const pt of s.persons) w.later(pt.at, () => w.personTurn(ids[pt.who % ids.length]!));
          await w.run({ for: 6 * HOUR });
          expect(w.busy).toBe(false);
          const ch = await w.channel('prop');
          const l = ledgerWakes(ch);
          expect(l.total).toBe(w.wakes.length);
          for (const [rid, n] of Object.entries(l.per)) expect(n, rid).toBe(w.wakesOf(rid));
          // Every hand-over but a crash's redelivery is new mail; none here is a redelivery.
          expect(w.wakes.every((x) => !x.redelivery)).toBe(true);
          for (const x of w.wakes) expect(x.chain).toBeLessThan(LOOP_WAKES);
          if (s.budget !== undefined)
            for (const me of ids) {
              const at = w.wakes.filter((x) => x.rid === me).map((x) => x.at);
              for (let i = s.budget; i < at.length; i++)
                expect(at[i]! - at[i - s.budget]!).toBeGreaterThanOrEqual(WAKE_BUDGET_WINDOW_MS);
            }
          for (const me of ids) if ((await w.state()).queues[me]?.length) await w.personTurn(me);
          expect(audit(w)).toEqual({ lost: [], duplicated: [], outOfOrder: [] });
        } finally {
          await w.close();
          await p.cleanup();
        }
      }),
      { numRuns: kind === 'file' ? 25 : 12 },
    );
  }, 60_000);

  it.each(['rest', 'hang'] as const)(
    'kill -9 of the process holding the loop (%s): a new process goes on; 0 lost; the chain and the hold persisted',
    async (mode) => {
      const t0 = Date.now();
      const setup = await world(kind, t0);
      await setUp(setup, 'team', [
        ['a', 'Lead'],
        ['b', 'Reviewer'],
      ]);
      await setup.send('a', { channel: 'team', content: 'Please review the parser.' });
      // The loop's owner: a child process, killed with SIGKILL after the 3rd wake.
      const child = startProcess(['--import', 'tsx', worker, setup.dir, String(setup.t + 1_100), '3', mode]);
      children.push(child);
      await child.waitFor((l) => l === 'paused', 20_000);
      child.child.kill('SIGKILL');
      await child.exited;
      const lines = child.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
      const childWakes = lines.filter((l) => 'wake' in l) as Array<{ wake: string; ids: string[]; at: number }>;
      expect(childWakes.map((x) => x.wake)).toEqual(['b', 'a', 'b']);
      const last = childWakes.at(-1)!;

      // A new process goes on 2 s after the last wake: the woken agent answers it (rest), or
      // the batch the dead process held in flight is swept back and handed over again (hang).
      const next = again(setup, last.at + 2_000);
      next.agents.set('a', answering('team', 2_000));
      next.agents.set('b', answering('team', 2_000));
      await next.rt.start();
      if (mode === 'rest') await next.send('b', { channel: 'team', content: 'Noted, standing by (after the crash).' });
      await next.run({ for: 30 * MINUTE });
      const all = [...childWakes.map((x) => ({ rid: x.wake, ids: x.ids })), ...next.wakes];
      if (mode === 'rest') {
        // The chain went on from the store: 6 wakes in all, not 3 + 6.
        expect(all.map((x) => x.rid)).toEqual(['b', 'a', 'b', 'a', 'b', 'a']);
      } else {
        // The hung batch is handed over again, flagged as a redelivery, and counted as a wake.
        expect(next.wakes[0]).toMatchObject({ rid: 'b', ids: last.ids, redelivery: true });
        expect(all.map((x) => x.rid)).toEqual(['b', 'a', 'b', 'b', 'a', 'b', 'a']);
      }
      const ch = await next.channel('team');
      expect(ch.holds).toEqual({ b: 'loop' });
      expect(ledgerWakes(ch).total).toBe(all.length);
      await next.close();

      // And a third process: the hold is in the store; starting an owner wakes nobody.
      const third = again(setup, next.t + 5 * MINUTE);
      third.agents.set('a', answering('team', 2_000));
      third.agents.set('b', answering('team', 2_000));
      await third.rt.start();
      await third.run({ for: 10 * MINUTE });
      expect(third.wakes).toEqual([]);
      expect((await third.channel('team')).wakes.b).toMatchObject({ held_by: 'loop', held_since: expect.any(Number) });
      await personTurnOfHeld(third, 'b', 'loop');

      // Every message once, in order: the child's, the setup's and the new processes' records.
      const sent = new Map<string, string[]>();
      const delivered = new Map<string, string[]>();
      const add = (m: Map<string, string[]>, rid: string, ids: string[]) => m.set(rid, [...(m.get(rid) ?? []), ...ids]);
      for (const [rid, ids] of setup.sent) add(sent, rid, ids);
      for (const l of lines)
        if ('sent' in l)
          (l.to as string[]).forEach((rid, i) => {
            add(sent, rid, [(l.ids as string[])[i]!]);
          });
      for (const [rid, ids] of next.sent) add(sent, rid, ids);
      for (const [rid, ids] of third.sent) add(sent, rid, ids);
      const redelivered = new Set(next.wakes.filter((x) => x.redelivery).flatMap((x) => x.ids));
      for (const x of childWakes) add(delivered, x.wake, x.ids);
      for (const x of next.wakes) if (!x.redelivery) add(delivered, x.rid, x.ids);
      for (const p of [...next.pulls, ...third.pulls]) add(delivered, p.sid, p.ids);
      expect(audit({ sent, delivered })).toEqual({ lost: [], duplicated: [], outOfOrder: [] });
      // The only repeat is the crash window's, flagged: the hung batch.
      expect([...redelivered]).toEqual(mode === 'hang' ? last.ids : []);
    },
    40_000,
  );
});

// Held mail past the stale window and an operator's release, each first found broken by this
// simulation: an owner that re-drained held mail in a loop, and a release that bought one wake.
describe('held mail past the stale window, and a release', () => {
  /** A polite pair on the file store, run until Reviewer's wakes are held by the loop guard. */
  async function heldPair(minutes: number) {
    const w = await world('file');
    await setUp(w, 'team', [
      ['a', 'Lead'],
      ['b', 'Reviewer'],
    ]);
    w.agents.set('a', answering('team', 2_000));
    w.agents.set('b', answering('team', 2_000));
    await w.send('a', { channel: 'team', content: 'Please review the parser.' });
    await w.run({ for: minutes * MINUTE });
    expect((await w.channel('team')).holds.b).toBe('loop');
    return w;
  }

  // An owner whose member is held arms no timer for the held mail's stale deadline (held mail never
  // ages out): the world counts every immediate re-arm as a spin.
  it("a held member's owner does not re-arm at once for held mail past the stale window", async () => {
    const w = await heldPair(1);
    w.t += STALE_EVENT_MS + REFLEX_MS;
    await w.rt.scan(); // a scan any store change starts in a process that delivers on change
    await w.run({ for: MINUTE });
    expect(w.spins).toBe(0);
  });

  // protocol.md "Wakes": a release raises every member's loop base to the held chain.
  it(`after an operator release, the polite pair gets ${LOOP_WAKES} more wakes`, async () => {
    const w = await heldPair(10);
    expect((await w.rt.run({ op: 'release_wakes', args: { channel: 'team' } })).ok).toBe(true);
    await w.run({ for: 30 * MINUTE });
    expect(w.wakes.length - LOOP_WAKES).toBe(LOOP_WAKES);
  });

  // Real time, once, as a process meets it: an owner starting beside held mail past the stale
  // window makes its start-up mutations and then none.
  it('an idle owner makes no locked mutation for held mail past the stale window', async () => {
    const w = await heldPair(1);
    const later = w.t + STALE_EVENT_MS + REFLEX_MS;
    await w.close();
    const rt = openRuntime(w.dir, {
      now: () => later,
      log: () => {},
      driver: { method: 'push', owns: () => true, deliver: async () => {} },
    });
    let mutations = 0;
    const mutate = rt.store.mutate.bind(rt.store);
    rt.store.mutate = ((fn: Parameters<typeof mutate>[0]) => {
      mutations++;
      return mutate(fn);
    }) as typeof rt.store.mutate;
    await rt.start(); // an owner starting (an OpenCode server, a Claude Code waiter at a turn's end)
    const started = mutations; // the start-up sweep, and the drain that finds the wake held
    await new Promise((r) => setTimeout(r, 300));
    await rt.close();
    expect(started).toBeGreaterThan(0);
    expect(mutations - started).toBe(0);
  });
});
