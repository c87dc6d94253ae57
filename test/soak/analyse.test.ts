// The soak's verdict must be able to fail: each figure is fed a crafted run holding exactly the
// defect it exists to catch (and the crash-window cases it must not blame).
import { describe, expect, it } from 'vitest';
import { EnvelopeSchema, type Envelope } from '../../src/protocol/schema.ts';
import { analyse, verdict, type Evidence } from '../../scripts/soak/analyse.ts';
import { contentToken } from '../../scripts/soak/plan.ts';
import type { Incarnation, PromptRecord, WriterRecord } from '../../scripts/soak/records.ts';

const CH = 'chn_00000000000000000000000000000001';
const [M1, M2, M3] = [1, 2, 3].map((n) => `ocm_${String(n).padStart(32, '0')}`) as [string, string, string];
type T = Envelope['transitions'];
const DELIVERED: T = [
  ['SEND', 'pending', 1],
  ['DRAIN', 'in_flight', 2],
  ['COMMIT', 'delivered', 3],
];
const REDELIVERED: T = [
  ['SEND', 'pending', 1],
  ['DRAIN', 'in_flight', 2],
  ['SWEEP', 'pending', 4],
  ['DRAIN', 'in_flight', 5],
  ['COMMIT', 'delivered', 6],
];

const env = (id: string, seq: number, over: Partial<Envelope> = {}): Envelope =>
  EnvelopeSchema.parse({
    message_id: id,
    channel_id: CH,
    sender_session_id: 'w1',
    recipient_session_id: 'o1',
    timestamp: seq,
    content: `${contentToken('w1', 0, seq)} x`,
    delivery_status: 'delivered',
    delivery_method: 'push',
    delivered_at: 10,
    transitions: DELIVERED,
    ...over,
  });
const sent = (seq: number, ids: string[], inc = 0): WriterRecord => ({
  kind: 'sent',
  inc,
  seq,
  at: seq,
  channel: 'soak-a',
  ids,
  broadcast: false,
  reply_to: null,
});
const prompt = (ids: string[], at: number, inc = 0): PromptRecord => ({
  inc,
  pid: 100 + inc,
  rid: 'o1',
  at,
  ids,
  redelivery: inc > 0,
  framed: true,
});
const life = (name: string, inc: number, from: number, to: number | null, killed = false): Incarnation => ({
  name,
  inc,
  pid: 100 + inc,
  started_at: from,
  ended_at: to,
  killed,
  exit: null,
});

function run(over: Partial<Evidence>) {
  return analyse({
    envelopes: [env(M1, 1), env(M2, 2), env(M3, 3)],
    writers: { w1: [sent(1, [M1]), sent(2, [M2]), sent(3, [M3])] },
    owners: { o1: [prompt([M1, M2], 20), prompt([M3], 30)] },
    incarnations: [life('w1', 0, 0, 100), life('o1', 0, 0, 100)],
    checks: [{ kind: 'tally', at: 100, reads: 7 }],
    kills: 0,
    inFlightAtEnd: 0,
    ...over,
  });
}

describe('soak verdict', () => {
  it('a clean run passes with every figure at zero', () => {
    const r = run({});
    expect(verdict(r)).toEqual([]);
    expect(r).toMatchObject({
      accepted_sends: 3,
      accepted_envelopes: 3,
      delivered: { push: 3, pull: 0 },
      lost: 0,
      fifo_violations: 0,
      state_reads: 7,
    });
  });

  it('lost: an accepted id missing from the store, or marked delivered with no prompt behind it', () => {
    expect(run({ envelopes: [env(M1, 1), env(M3, 3)] }).lost).toBe(1);
    const r = run({ owners: { o1: [prompt([M1, M2], 20)] } });
    expect(r.lost).toBe(1);
    expect(r.examples.lost![0]).toBe(`${M3}: delivered via push, 0 delivery record(s)`);
    expect(run({ envelopes: [env(M1, 1), env(M2, 2), env(M3, 3, { delivery_status: 'stale' })] }).lost).toBe(1);
  });

  it('pending and in-flight leftovers are their own figures', () => {
    const r = run({
      envelopes: [env(M1, 1), env(M2, 2), env(M3, 3, { delivery_status: 'pending' })],
      owners: { o1: [prompt([M1, M2], 20)] },
      inFlightAtEnd: 2,
    });
    expect(verdict(r)).toEqual(['still_pending=1', 'stuck_in_flight=2']);
  });

  it('FIFO: a newer message handed over before an older one, or out of order inside one prompt', () => {
    expect(run({ owners: { o1: [prompt([M2], 20), prompt([M1], 25), prompt([M3], 30)] } }).fifo_violations).toBe(1);
    // m2 ahead of m1, and m1 behind m2 in the same prompt: two hand-overs out of order.
    expect(run({ owners: { o1: [prompt([M2, M1, M3], 20)] } }).fifo_violations).toBe(2);
    // A crash re-delivery that repeats a batch in another order (each first hand-over was fine).
    const r = run({
      envelopes: [env(M1, 1, { transitions: REDELIVERED }), env(M2, 2, { transitions: REDELIVERED }), env(M3, 3)],
      owners: { o1: [prompt([M1, M2], 20, 0), prompt([M2, M1, M3], 40, 1)] },
      incarnations: [life('w1', 0, 0, 100), life('o1', 0, 0, 25, true), life('o1', 1, 26, 100)],
    });
    expect(r.fifo_violations).toBe(1);
    expect(r.examples.fifo_violations).toEqual([`${M1} follows a later message of w1>o1@${CH} inside one hand-over`]);
  });

  it('a batch re-delivered after its owner was killed before commit: inside the crash window, FIFO kept', () => {
    const r = run({
      envelopes: [env(M1, 1, { transitions: REDELIVERED }), env(M2, 2, { transitions: REDELIVERED }), env(M3, 3)],
      owners: { o1: [prompt([M1, M2], 20, 0), prompt([M1, M2, M3], 40, 1)] },
      incarnations: [life('w1', 0, 0, 100), life('o1', 0, 0, 25, true), life('o1', 1, 26, 100)],
      kills: 1,
    });
    expect(r.duplicate_prompts).toEqual({ inside_crash_window: 2, outside_crash_window: 0 });
    expect(r.fifo_violations).toBe(0);
    expect(verdict(r)).toEqual([]);
  });

  it('a repeat whose first owner was not killed, or after a commit, is outside the window', () => {
    const alive = run({
      envelopes: [env(M1, 1, { transitions: REDELIVERED }), env(M2, 2), env(M3, 3)],
      owners: { o1: [prompt([M1], 20, 0), prompt([M1, M2, M3], 40, 1)] },
      incarnations: [life('w1', 0, 0, 100), life('o1', 0, 0, 25), life('o1', 1, 26, 100)],
    });
    expect(alive.duplicate_prompts).toEqual({ inside_crash_window: 0, outside_crash_window: 1 });
    const resurrected: T = [
      ['SEND', 'pending', 1],
      ['DRAIN', 'in_flight', 2],
      ['COMMIT', 'delivered', 3],
      ['DRAIN', 'in_flight', 5],
      ['COMMIT', 'delivered', 6],
    ];
    const r = run({
      envelopes: [env(M1, 1, { transitions: resurrected }), env(M2, 2), env(M3, 3)],
      owners: { o1: [prompt([M1], 20, 0), prompt([M1, M2, M3], 40, 1)] },
      incarnations: [life('w1', 0, 0, 100), life('o1', 0, 0, 25, true), life('o1', 1, 26, 100)],
    });
    expect(r.duplicate_prompts.outside_crash_window).toBe(1);
    expect(verdict(r)).toContain('duplicate_prompts.outside_crash_window=1');
  });

  it('a recorded id that is not a message id is a record mismatch', () => {
    const r = run({
      envelopes: [env(M1, 1), env(M2, 2), env(M3, 3), env('m4', 4)],
      writers: { w1: [sent(1, [M1]), sent(2, [M2]), sent(3, [M3]), sent(4, ['m4'])] },
      owners: { o1: [prompt([M1, M2, M3, 'm4'], 20)] },
    });
    expect([r.record_mismatches, r.lost]).toEqual([1, 0]);
  });

  it('a send the store accepted from a writer killed before it could record it is accepted-unrecorded, never lost', () => {
    const base = { writers: { w1: [sent(1, [M1]), sent(2, [M2])] } };
    const killed = run({ ...base, incarnations: [life('w1', 0, 0, 50, true), life('o1', 0, 0, 100)] });
    expect(killed).toMatchObject({ accepted_unrecorded: 1, record_mismatches: 0, lost: 0, accepted_envelopes: 3 });
    // The same gap in a writer nobody killed is a contradiction between store and record.
    expect(run(base).record_mismatches).toBe(1);
    // A send recorded as refused that the store holds anyway.
    const refused: WriterRecord = { kind: 'refused', inc: 0, seq: 3, at: 3, channel: 'soak-a', reason: 'state_busy' };
    expect(run({ writers: { w1: [sent(1, [M1]), sent(2, [M2]), refused] } }).record_mismatches).toBe(1);
  });

  it('a pull committed to a writer killed before it recorded it is the read window, anything else is lost', () => {
    const toW2 = (id: string, seq: number) =>
      env(id, seq, { recipient_session_id: 'w2', delivery_method: 'pull', delivered_at: 60 });
    const envelopes = [toW2(M1, 1), toW2(M2, 2), toW2(M3, 3)];
    const writers = {
      w1: [sent(1, [M1]), sent(2, [M2]), sent(3, [M3])],
      w2: [{ kind: 'pulled', inc: 0, seq: 1, at: 40, ids: [M1] } as WriterRecord],
    };
    const killed = run({
      envelopes,
      writers,
      owners: {},
      incarnations: [life('w1', 0, 0, 100), life('w2', 0, 0, 70, true), life('w2', 1, 71, 100)],
    });
    expect(killed).toMatchObject({ lost: 0, delivered: { push: 0, pull: 1, pull_unrecorded: 2 }, fifo_violations: 0 });
    const alive = run({ envelopes, writers, owners: {}, incarnations: [life('w1', 0, 0, 100), life('w2', 0, 0, 100)] });
    expect(alive.lost).toBe(2);
  });

  it('a batch shown again by the same owner after the store fenced its commit (lease lapsed, swept): inside the window', () => {
    // o1's process lived through the partition: one incarnation (PID 100) shows M1 twice.
    const base = {
      envelopes: [env(M1, 1, { transitions: REDELIVERED }), env(M2, 2), env(M3, 3)],
      owners: { o1: [prompt([M1], 20, 0), prompt([M1, M2, M3], 40, 0)] },
      incarnations: [life('w1', 0, 0, 100), life('o1', 0, 0, 100)],
    };
    const fence = (ids: string[], pid = 100) => ({
      at: 30,
      message: `A commit by ${pid}@vm/aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee was refused for ${ids.length} envelope(s) it no longer holds (${ids.join(', ')}): …`,
    });
    const fenced = run({ ...base, fenced: [fence([M1])] });
    expect(fenced.duplicate_prompts).toEqual({ inside_crash_window: 1, outside_crash_window: 0 });
    expect(fenced.fenced_commits).toBe(1);
    expect(fenced.fenced_commits_outside_outages).toBe(1);
    expect(verdict(fenced)).toEqual([]);
    // Seen by the checker rather than left in the final state: the same.
    expect(run({ ...base, checks: [{ kind: 'fenced', ...fence([M1]) }] }).duplicate_prompts.outside_crash_window).toBe(
      0,
    );
    // No fence, a fence of another envelope, or of another process: outside.
    expect(verdict(run(base))).toContain('duplicate_prompts.outside_crash_window=1');
    expect(run({ ...base, fenced: [fence([M2])] }).duplicate_prompts.outside_crash_window).toBe(1);
    expect(run({ ...base, fenced: [fence([M1], 999)] }).duplicate_prompts.outside_crash_window).toBe(1);
    // During a machine outage, a fence is that outage's.
    const cut = {
      machine: 1,
      kind: 'partition' as const,
      names: ['o1'],
      from: 22,
      to: 28,
      held: 1,
      unswept: 0,
      sweep_ms: [3100],
    };
    expect(run({ ...base, fenced: [fence([M1])], outages: [cut] }).fenced_commits_outside_outages).toBe(0);
  });

  it('reads refused while the server restarts and fenced commits are counted, not failures', () => {
    const r = run({
      checks: [
        { kind: 'refused', at: 5, reason: 'state_unreadable' },
        { kind: 'refused', at: 6, reason: 'state_unreadable' },
        { kind: 'fenced', at: 7, message: 'late commit' },
        { kind: 'tally', at: 9, reads: 3 },
      ],
    });
    expect(r.state_reads_refused).toEqual({ state_unreadable: 2 });
    expect(r.fenced_commits).toBe(1);
    expect(r.state_parse_failures).toBe(0);
    expect(verdict(r)).toEqual([]);
  });

  it('misrouted hand-overs, state read failures and crashes fail the run', () => {
    expect(
      run({ owners: { o1: [prompt([M1, M2, M3], 20)], o2: [{ ...prompt([M1], 21), rid: 'o2' }] } }).misrouted,
    ).toBe(1);
    expect(
      run({
        checks: [
          { kind: 'failure', at: 5, cause: 'threw: x' },
          { kind: 'tally', at: 9, reads: 3 },
        ],
      }).state_parse_failures,
    ).toBe(1);
    expect(run({ incarnations: [life('w1', 0, 0, 100), { ...life('o1', 0, 0, 50), exit: '1' }] }).crashes).toBe(1);
    expect(run({ owners: { o1: [{ ...prompt([M1, M2, M3], 20), framed: false }] } }).unframed_prompts).toBe(1);
  });
});
