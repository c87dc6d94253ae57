// Property tests (fast-check): random interleavings of send / drain / commit / requeue / sweep /
// tick / pull (plus pause and stale marks, and late commits of crashed processes that come back)
// across 2–4 members in push, spawn_push and pull modes,
// one or two channels, with and without a message budget. After every step the engine's
// invariants must hold (DESIGN.md "Tests follow the architecture", FEATURES.md §5).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Effect, Outcome } from '../../src/engine/index.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../src/protocol/limits.ts';
import { TERMINAL_STATUSES, type Envelope } from '../../src/protocol/schema.ts';
import { caller, Sim, trailError, type Mode } from './fixtures.ts';

type Prompt = Extract<Effect, { type: 'Prompt' }>;

const setupArb = fc.record({
  modes: fc.array(fc.constantFrom<Mode>('push', 'push', 'spawn_push', 'pull'), { minLength: 2, maxLength: 4 }),
  second: fc.boolean(),
  budget: fc.option(fc.integer({ min: 1, max: 15 }), { nil: null }),
});

const opArb = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('send' as const),
      ch: fc.nat(),
      from: fc.nat(),
      to: fc.option(fc.nat(), { nil: null }),
      broadcast: fc.boolean(),
      reply: fc.option(fc.nat(), { nil: null }),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('drain' as const),
      rid: fc.nat(),
      proc: fc.nat(),
      max: fc.option(fc.integer({ min: 1, max: 20 }), { nil: null }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('commit' as const), p: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('requeue' as const), p: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('sweep' as const), crash: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('late' as const), p: fc.nat(), commit: fc.boolean() }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      ms: fc.constantFrom(1, 400, 1000, 2000, 5000, 60_001, 300_001),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('pull' as const),
      rid: fc.nat(),
      scoped: fc.option(fc.nat(), { nil: null }),
      limit: fc.option(fc.integer({ min: 1, max: 5 }), { nil: null }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('pause' as const), ch: fc.nat(), by: fc.nat(), on: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('stale' as const), who: fc.nat(), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('kick' as const), ch: fc.nat(), who: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rejoin' as const), ch: fc.nat(), who: fc.nat() }) },
);
type Op = typeof opArb extends fc.Arbitrary<infer O> ? O : never;

const pick = <T>(xs: readonly T[], n: number): T | undefined => (xs.length ? xs[n % xs.length] : undefined);

/** The world around the engine: processes, outstanding prompts, what was sent and logged. */
class World {
  sim = new Sim();
  members: { sid: string; mode: Mode }[];
  channels: string[];
  procs: string[] = ['p1@host'];
  nextProc = 2;
  prompts: { prompt: Prompt; by: string }[] = [];
  /** Prompts of processes a sweep declared dead: one that comes back (a partition healed) answers
   *  them late, and must be fenced. */
  late: { prompt: Prompt; by: string }[] = [];
  /** Late commits and requeues answered, and the ids they were refused for. */
  fenced = 0;
  /** Send order of every envelope ever accepted. */
  order = new Map<string, number>();
  logged = new Map<string, Envelope>();
  /** Terminal statuses seen so far: they may never change. */
  terminal = new Map<string, string>();
  /** Delivery order per (channel, sender, recipient). */
  deliveredSeq = new Map<string, number[]>();
  budget: number | null;

  constructor(setup: { modes: Mode[]; second: boolean; budget: number | null }) {
    this.budget = setup.budget;
    this.members = setup.modes.map((mode, i) => ({ sid: `sess_${i}`, mode }));
    const opts = { rate_limit: 1000, ...(setup.budget === null ? {} : { budget_messages: setup.budget }) };
    this.sim.channel(
      'c0',
      this.members.map((m, i) => [m.sid, `Role ${i}`, m.mode]),
      opts,
    );
    this.channels = ['c0'];
    if (setup.second) {
      // The same sessions in a second channel, in another order and another role each.
      const rev = [...this.members].reverse();
      this.sim.channel(
        'c1',
        rev.map((m, i) => [m.sid, `Other ${i}`, m.mode]),
        opts,
      );
      this.channels.push('c1');
    }
  }

  pairKey = (e: Envelope) => `${e.channel_id}|${e.sender_session_id}|${e.recipient_session_id}`;

  all(): Envelope[] {
    return [...Object.values(this.sim.state.messages), ...this.logged.values()];
  }

  step(op: Op): string {
    const sim = this.sim;
    const before = JSON.stringify(sim.state);
    const statusBefore = new Map(Object.values(sim.state.messages).map((e) => [e.message_id, e.delivery_status]));
    let o: Outcome | null = null;
    let deliveredInOrder: string[] = [];
    switch (op.kind) {
      case 'send': {
        const ch = pick(this.channels, op.ch)!;
        const roster = sim.ch(ch).members;
        const from = pick(roster, op.from)!;
        const others = roster.filter((m) => m.session_id !== from.session_id);
        const to = op.to === null ? undefined : pick(others, op.to)?.session_id;
        const prior = [...this.order.keys()];
        const reply = op.reply === null ? undefined : pick(prior, op.reply);
        o = sim.run({
          op: 'send',
          sid: from.session_id,
          args: {
            channel: ch,
            content: `c${this.order.size}-${op.from}`,
            ...(op.broadcast ? { broadcast: true } : to ? { to } : {}),
            ...(reply ? { reply_to: reply } : {}),
          },
        });
        if (o.result.ok)
          for (const id of (o.result.data as { message_ids: string[] }).message_ids)
            this.order.set(id, this.order.size);
        break;
      }
      case 'drain': {
        const pushers = this.members.filter((m) => m.mode !== 'pull');
        const m = pick(pushers, op.rid);
        if (!m) return 'skip';
        sim.by = pick(this.procs, op.proc)!;
        o = sim.drain(m.sid, op.max === null ? undefined : { max: op.max });
        const p = o.effects.find((e): e is Prompt => e.type === 'Prompt');
        if (p) this.prompts.push({ prompt: p, by: sim.by });
        break;
      }
      case 'commit':
      case 'requeue': {
        if (!this.prompts.length) return 'skip';
        const i = op.p % this.prompts.length;
        const { prompt, by } = this.prompts.splice(i, 1)[0]!;
        const held = { by, attempts: prompt.attempts };
        if (op.kind === 'commit') {
          o = sim.commit(prompt, prompt.mode === 'spawn_push' ? 'spawn_push' : 'push', held);
          deliveredInOrder = prompt.message_ids;
        } else o = sim.requeue(prompt, undefined, held);
        break;
      }
      case 'late': {
        if (!this.late.length) return 'skip';
        const { prompt, by } = this.late.splice(op.p % this.late.length, 1)[0]!;
        const held = { by, attempts: prompt.attempts };
        const statuses = JSON.stringify(
          Object.values(sim.state.messages).map((e) => [e.message_id, e.delivery_status, e.attempts, e.in_flight_by]),
        );
        const o2 = op.commit ? sim.commit(prompt, 'push', held) : sim.requeue(prompt, undefined, held);
        // Fencing: the late answer settles nothing; it is refused (hold_lost) and recorded
        // whenever one of its envelopes is still there to be fenced.
        const after = JSON.stringify(
          Object.values(sim.state.messages).map((e) => [e.message_id, e.delivery_status, e.attempts, e.in_flight_by]),
        );
        if (after !== statuses)
          throw new Error(`a late ${op.commit ? 'commit' : 'requeue'} of ${by} changed envelopes`);
        const fenced = (o2.result.data as { fenced?: string[] } | undefined)?.fenced ?? [];
        if (fenced.length) {
          this.fenced++;
          if (sim.state.errors.at(-1)?.reason !== 'hold_lost') throw new Error('a fenced answer was not recorded');
        }
        if (!o2.result.ok && (o2.result.data as { reason?: string }).reason !== 'hold_lost')
          throw new Error(`late answer refused with ${JSON.stringify(o2.result)}`);
        return 'late';
      }
      case 'sweep': {
        // A crashed process is gone for good: its prompts never answer; a new process replaces it.
        const crashed = new Set(this.procs.filter((_, i) => (op.crash >> i) & 1));
        o = sim.run({ op: 'sweep', alive: (by) => this.procs.includes(by) && !crashed.has(by) });
        this.late.push(...this.prompts.filter((p) => crashed.has(p.by)));
        this.prompts = this.prompts.filter((p) => !crashed.has(p.by));
        this.procs = this.procs.filter((p) => !crashed.has(p));
        for (let i = 0; i < crashed.size || this.procs.length === 0; i++) this.procs.push(`p${this.nextProc++}@host`);
        break;
      }
      case 'tick':
        sim.advance(op.ms);
        return 'tick';
      case 'pull': {
        const pullers = this.members.filter((m) => m.mode === 'pull');
        const m = pick(pullers, op.rid);
        if (!m) return 'skip';
        const channel = op.scoped === null ? undefined : pick(this.channels, op.scoped);
        o = sim.run({
          op: 'pull',
          sid: m.sid,
          args: { ...(channel ? { channel } : {}), ...(op.limit ? { limit: op.limit } : {}) },
        });
        if (o.result.ok) deliveredInOrder = (o.result.data as { message_ids: string[] }).message_ids;
        break;
      }
      case 'pause': {
        const ch = pick(this.channels, op.ch)!;
        const by = pick(sim.ch(ch).members, op.by)!;
        o = sim.run({ op: op.on ? 'pause' : 'resume', sid: by.session_id, args: { channel: ch } });
        break;
      }
      case 'stale': {
        const m = pick(this.members, op.who)!;
        o = sim.run({ op: op.on ? 'mark_stale' : 'clear_stale', session: m.sid });
        break;
      }
      case 'kick': {
        // The coordinator removes someone; the notices it sends are envelopes like any other.
        const ch = pick(this.channels, op.ch)!;
        const [coordinator, ...rest] = sim.ch(ch).members;
        const target = pick(rest, op.who);
        if (!coordinator || !target) return 'skip';
        o = sim.run({
          op: 'kick',
          caller: coordinator.session_id,
          args: { channel: ch, target_session_id: target.session_id },
        });
        for (const id of Object.keys(sim.state.messages)) if (!this.order.has(id)) this.order.set(id, this.order.size);
        break;
      }
      case 'rejoin': {
        const ch = pick(this.channels, op.ch)!;
        const away = this.members.filter((m) => !sim.ch(ch).members.some((x) => x.session_id === m.sid));
        const m = pick(away, op.who);
        if (!m) return 'skip';
        o = sim.run({
          op: 'join',
          caller: caller(m.sid, m.mode),
          args: { channel: ch, role: `Back ${this.order.size}`, role_prompt: 'Back.' },
        });
        break;
      }
    }
    if (!o) return 'skip';
    // Contract of the store: no change reported ⇒ nothing changed; a refusal changes nothing.
    if (!o.changed || !o.result.ok) {
      if (JSON.stringify(sim.state) !== before)
        throw new Error(`${op.kind} reported no change (ok=${o.result.ok}) but changed the state`);
      if (o.writes) throw new Error(`${op.kind} reported no change but returned writes`);
    }
    if (!o.result.ok && !(o.result.data as { reason?: string })?.reason)
      throw new Error(`${op.kind} refused without a reason`);
    for (const e of o.writes?.history ?? []) {
      if (this.logged.has(e.message_id)) throw new Error(`${e.message_id} emitted to the history log twice`);
      this.logged.set(e.message_id, e);
    }
    // Delivery order per pair, in the order the batch was handed over.
    for (const id of deliveredInOrder) {
      const e = sim.state.messages[id] ?? this.logged.get(id);
      if (e?.delivery_status !== 'delivered' || statusBefore.get(id) === 'delivered') continue;
      const seq = this.deliveredSeq.get(this.pairKey(e)) ?? [];
      seq.push(this.order.get(id)!);
      this.deliveredSeq.set(this.pairKey(e), seq);
    }
    return op.kind;
  }

  /** Every invariant; throws with a description of the first breach. */
  check() {
    const { state } = this.sim;
    const fail = (msg: string) => {
      throw new Error(msg);
    };
    // No envelope lost: every accepted id is hot or was emitted to the history log, never both.
    for (const id of this.order.keys()) {
      const hot = id in state.messages;
      if (!hot && !this.logged.has(id)) fail(`${id} was lost`);
      if (hot && this.logged.has(id)) fail(`${id} is both hot and logged`);
    }
    for (const id of Object.keys(state.messages)) if (!this.order.has(id)) fail(`${id} appeared from nowhere`);
    // Queues: entries only for pending envelopes of that recipient, once each; every pending
    // envelope is queued; in_flight never is.
    const queued = new Set<string>();
    for (const [rid, q] of Object.entries(state.queues)) {
      for (const id of q) {
        const e = state.messages[id];
        if (!e) fail(`queue ${rid} holds missing ${id}`);
        if (e!.delivery_status !== 'pending') fail(`queue ${rid} holds ${id} in ${e!.delivery_status}`);
        if (e!.recipient_session_id !== rid) fail(`queue ${rid} holds ${id} for ${e!.recipient_session_id}`);
        if (queued.has(id)) fail(`${id} queued twice`);
        queued.add(id);
      }
    }
    const inFlightAt = new Map<string, number | null>();
    for (const e of Object.values(state.messages)) {
      if (e.delivery_status === 'pending' && !queued.has(e.message_id)) fail(`pending ${e.message_id} is in no queue`);
      if (e.attempts > MAX_DELIVERY_ATTEMPTS) fail(`${e.message_id} has ${e.attempts} attempts`);
      const inFlight = e.delivery_status === 'in_flight';
      if (inFlight !== (e.in_flight_at !== null) || inFlight !== (e.in_flight_by !== null))
        fail(
          `${e.message_id} in ${e.delivery_status} with in_flight_by=${e.in_flight_by} in_flight_at=${e.in_flight_at}`,
        );
      if (e.delivery_status === 'delivered' && (e.delivered_at === null || e.delivery_method === null))
        fail(`${e.message_id} delivered without time/method`);
      if (inFlight) {
        // The in-flight guard: one batch per recipient per channel.
        const k = `${e.channel_id}|${e.recipient_session_id}`;
        if (inFlightAt.has(k) && inFlightAt.get(k) !== e.in_flight_at) fail(`two batches in flight for ${k}`);
        inFlightAt.set(k, e.in_flight_at);
        // hasInFlight skips its scan for a recipient with no cooldown: a batch in flight keeps one.
        const ch = Object.values(state.channels).find((c) => c.id === e.channel_id);
        if (ch && ch.lifecycle === 'active' && ch.cooldown_until[e.recipient_session_id] === undefined)
          fail(`${e.message_id} in flight for ${e.recipient_session_id} with no cooldown on its channel`);
      }
    }
    const all = this.all();
    for (const e of all) {
      // Terminal statuses never change.
      const was = this.terminal.get(e.message_id);
      if (was !== undefined && was !== e.delivery_status)
        fail(`${e.message_id} left terminal ${was} for ${e.delivery_status}`);
      if (TERMINAL_STATUSES.includes(e.delivery_status)) this.terminal.set(e.message_id, e.delivery_status);
      const err = trailError(e);
      if (err) fail(err);
      // Every hand-over was a DRAIN → in_flight or a PULL → delivered, and `attempts` counts them.
      const handOvers = e.transitions.filter(
        ([ev, to]) => (ev === 'DRAIN' && to === 'in_flight') || (ev === 'PULL' && to === 'delivered'),
      ).length;
      if (handOvers !== e.attempts) fail(`${e.message_id}: ${handOvers} hand-overs but attempts=${e.attempts}`);
    }
    // Budgets, and delivered_total = every hand-over of the channel (retries included).
    for (const name of this.channels) {
      const ch = state.channels[name]!;
      if (this.budget !== null && ch.delivered_total > this.budget)
        fail(`${name}: delivered_total ${ch.delivered_total} > budget ${this.budget}`);
      const handed = all.filter((e) => e.channel_id === ch.id).reduce((n, e) => n + e.attempts, 0);
      if (handed !== ch.delivered_total)
        fail(`${name}: delivered_total ${ch.delivered_total} but ${handed} hand-overs`);
    }
    // FIFO per (channel, sender, recipient): nothing handed over while an older envelope of the
    // pair still waits, and deliveries happen in send order.
    const byPair = new Map<string, Envelope[]>();
    for (const e of all) byPair.set(this.pairKey(e), [...(byPair.get(this.pairKey(e)) ?? []), e]);
    for (const [pair, list] of byPair) {
      list.sort((a, b) => this.order.get(a.message_id)! - this.order.get(b.message_id)!);
      let oldestPending = Infinity;
      for (const e of list)
        if (e.delivery_status === 'pending') oldestPending = Math.min(oldestPending, this.order.get(e.message_id)!);
      for (const e of list)
        if (
          (e.delivery_status === 'in_flight' || e.delivery_status === 'delivered') &&
          this.order.get(e.message_id)! > oldestPending
        )
          fail(`FIFO: ${e.message_id} (${e.delivery_status}) overtook an older pending envelope on ${pair}`);
    }
    for (const [pair, seq] of this.deliveredSeq)
      for (let i = 1; i < seq.length; i++)
        if (seq[i]! <= seq[i - 1]!) fail(`FIFO: deliveries out of send order on ${pair}: ${seq.join(',')}`);
  }
}

describe('engine invariants under random interleavings', () => {
  it('hold after every step', () => {
    const kinds = new Map<string, number>();
    let steps = 0;
    let delivered = 0;
    let fenced = 0;
    fc.assert(
      fc.property(setupArb, fc.array(opArb, { minLength: 10, maxLength: 60, size: 'max' }), (setup, ops) => {
        const w = new World(setup);
        w.check();
        for (const op of ops) {
          const k = w.step(op);
          kinds.set(k, (kinds.get(k) ?? 0) + 1);
          w.check();
        }
        steps += ops.length;
        fenced += w.fenced;
        delivered += w.all().filter((e) => e.delivery_status === 'delivered').length;
      }),
      { numRuns: 300 },
    );
    // The generator reaches every operation.
    for (const k of [
      'send',
      'drain',
      'commit',
      'requeue',
      'sweep',
      'late',
      'tick',
      'pull',
      'pause',
      'stale',
      'kick',
      'rejoin',
    ])
      expect(kinds.get(k) ?? 0, k).toBeGreaterThan(0);
    // Late answers of swept batches were met, and fenced.
    expect(fenced).toBeGreaterThan(0);
    // ...and enough of the runs get mail all the way through.
    expect(delivered).toBeGreaterThan(steps / 50);
  });

  it('long runs reach dead letters, stale mail and retention', () => {
    const seen = { failed: 0, stale: 0, logged: 0, delivered: 0 };
    fc.assert(
      fc.property(
        setupArb.map((s) => ({ ...s, budget: null })),
        fc.array(
          fc.oneof(
            { weight: 4, arbitrary: opArb },
            { weight: 3, arbitrary: fc.record({ kind: fc.constant('requeue' as const), p: fc.nat() }) },
            {
              weight: 3,
              arbitrary: fc.record({
                kind: fc.constant('drain' as const),
                rid: fc.nat(),
                proc: fc.nat(),
                max: fc.constant(null),
              }),
            },
            { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.constant(2000) }) },
          ),
          { minLength: 100, maxLength: 250, size: 'max' },
        ),
        (setup, ops) => {
          const w = new World(setup);
          for (const op of ops) {
            w.step(op);
            w.check();
          }
          const all = w.all();
          seen.failed += all.filter((e) => e.delivery_status === 'failed').length;
          seen.stale += all.filter((e) => e.delivery_status === 'stale').length;
          seen.delivered += all.filter((e) => e.delivery_status === 'delivered').length;
          seen.logged += w.logged.size;
        },
      ),
      { numRuns: 40 },
    );
    expect(seen.failed).toBeGreaterThan(0);
    expect(seen.stale).toBeGreaterThan(0);
    expect(seen.delivered).toBeGreaterThan(0);
    expect(seen.logged).toBeGreaterThan(0);
  });
});
