// The pure half of the inspector (src/inspect/model.ts, diff.ts): the machine's own events between two
// stored values, and a look in which one envelope moved several times (its earlier snapshots are the
// envelope machine's replay of its receipt; its last is the stored record).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { diff, emptySeen } from '../../src/cli/watch/diff.ts';
import { COUNTED, inspectLook, nothingShown } from '../../src/inspect/diff.ts';
import { channelRecordOf, MACHINES, step } from '../../machines/index.ts';
import { eventsBetween, type InspectOp } from '../../src/inspect/model.ts';
import { DELIVERY_COOLDOWN_MS } from '../../src/protocol/limits.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { setUp, TOKENS } from './scenario.ts';

describe('eventsBetween: the shortest run of a machine’s own events', () => {
  const steps = (...a: Parameters<typeof eventsBetween>) => eventsBetween(...a).map((s) => `${s.event}>${s.target}`);
  it('takes the hinted events first, through an intermediate state', () => {
    expect(steps('recipient', 'ready', 'cooling', ['DRAIN', 'COMMIT'])).toEqual(['DRAIN>delivering', 'COMMIT>cooling']);
    expect(steps('recipient', 'ready', 'cooling', ['DRAIN', 'SWEEP'])).toEqual(['DRAIN>delivering', 'SWEEP>cooling']);
  });
  it('finds the one event a move has', () => {
    expect(steps('channel', 'active', 'paused', [])).toEqual(['PAUSE>paused']);
    expect(steps('channel', 'paused', 'saved', [])).toEqual(['SAVE>saved']);
    expect(steps('member', 'stale', 'linked', [])).toEqual(['CLEAR_STALE>linked']);
  });
  it('names a self-transition only when the look saw it; a channel each one it saw', () => {
    expect(steps('channel', 'active', 'active', ['SEND'])).toEqual(['SEND>active']);
    expect(steps('channel', 'active', 'active', ['SEND', 'HAND_OVER'])).toEqual(['SEND>active', 'HAND_OVER>active']);
    expect(steps('channel', 'active', 'active', [])).toEqual([]);
    expect(steps('recipient', 'cooling', 'cooling', ['DRAIN', 'TICK'])).toEqual(['DRAIN>cooling']);
  });
});

let dir: string;
let rt: Runtime;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-inspect-model-'));
  rt = openRuntime(dir);
});
afterEach(async () => {
  await rt.close();
  await rm(dir, { recursive: true, force: true });
});

describe('inspectLook', () => {
  it('one look, four moves of one envelope: SEND, DRAIN, SWEEP, DRAIN', async () => {
    await setUp(rt, dir);
    const before = await rt.store.read();
    const first = inspectLook(nothingShown(), { state: before, logged: [], lines: [], now: Date.now() });
    const seen = diff(emptySeen(), before, [], new Set(), Date.now(), true).seen;
    const sent = await rt.run({
      op: 'send',
      sid: TOKENS.sidLead,
      args: { channel: 'team', content: 'x', to: 'Pusher' },
    });
    const id = (sent as unknown as { data: { message_ids: string[] } }).data.message_ids[0]!;
    await rt.run({ op: 'drain', rid: TOKENS.sidPusher });
    await rt.run({ op: 'sweep', alive: () => false });
    // The recipient's cooldown from the first drain (DELIVERY_COOLDOWN_MS) holds a drain back until it ends.
    await sleep(DELIVERY_COOLDOWN_MS + 100);
    await rt.run({ op: 'drain', rid: TOKENS.sidPusher });
    const after = await rt.store.read();
    const lines = diff(seen, after, [], new Set(), Date.now()).lines;
    const look = inspectLook(first.shown, { state: after, logged: [], lines, now: Date.now() });
    const mine = look.ops.filter((o) => o.id === `envelope:${id}`);
    const brief = (o: InspectOp) =>
      o.op === 'event'
        ? `event ${o.event.type}`
        : `${o.op} ${o.snapshot.value} attempts=${o.snapshot.context.attempts} in_flight_at=${o.snapshot.context.in_flight_at === null ? 'null' : 'set'}`;
    expect(mine.map(brief)).toEqual([
      'actor pending attempts=0 in_flight_at=null',
      'event DRAIN',
      'snapshot in_flight attempts=1 in_flight_at=set',
      'event SWEEP',
      'snapshot pending attempts=1 in_flight_at=null',
      'event DRAIN',
      'snapshot in_flight attempts=2 in_flight_at=set',
    ]);
    // The last snapshot is the stored record itself.
    const last = mine.at(-1) as Extract<InspectOp, { op: 'snapshot' }>;
    const stored = after.messages[id]!;
    expect(last.snapshot.context).toEqual({
      timestamp: stored.timestamp,
      attempts: stored.attempts,
      delivered_at: stored.delivered_at,
      delivery_method: stored.delivery_method,
      in_flight_by: stored.in_flight_by,
      in_flight_at: stored.in_flight_at,
    });
  });

  it('one look holding a send and its pull: SEND, the envelope, HAND_OVER, PULL, in the order they happened', async () => {
    await setUp(rt, dir);
    const before = await rt.store.read();
    const first = inspectLook(nothingShown(), { state: before, logged: [], lines: [], now: Date.now() });
    const seen = diff(emptySeen(), before, [], new Set(), Date.now(), true).seen;
    const sent = await rt.run({
      op: 'send',
      sid: TOKENS.sidPusher,
      args: { channel: 'team', content: 'x', to: 'Lead' },
    });
    const id = (sent as unknown as { data: { message_ids: string[] } }).data.message_ids[0]!;
    await rt.run({ op: 'pull', sid: TOKENS.sidLead, args: { channel: 'team' } });
    const after = await rt.store.read();
    const logged = await rt.store.history(after.channels.team!.id, 50);
    const lines = diff(seen, after, logged, new Set([after.channels.team!.id]), Date.now()).lines;
    const look = inspectLook(first.shown, { state: after, logged, lines, now: Date.now() });
    const shown = look.ops.map((o) =>
      o.op === 'event' ? `${o.id} ${o.event.type}` : o.op === 'actor' ? `new ${o.id}` : null,
    );
    expect(shown.filter((x) => x !== null)).toEqual([
      'channel:team SEND',
      `new envelope:${id}`,
      'channel:team HAND_OVER',
      `envelope:${id} PULL`,
    ]);
  });

  it('a look whose state was read before a newer history log: no second registration, the hand-over one look later', async () => {
    await setUp(rt, dir);
    const sent = await rt.run({
      op: 'send',
      sid: TOKENS.sidPusher,
      args: { channel: 'team', content: 'x', to: 'Lead' },
    });
    const id = (sent as unknown as { data: { message_ids: string[] } }).data.message_ids[0]!;
    const stale = await rt.store.read();
    const first = inspectLook(nothingShown(), { state: stale, logged: [], lines: [], now: Date.now() });
    const seen = diff(emptySeen(), stale, [], new Set(), Date.now(), true).seen;
    await rt.run({ op: 'pull', sid: TOKENS.sidLead, args: { channel: 'team' } });
    const logged = await rt.store.history(stale.channels.team!.id, 50);
    // The state as read before the pull, the log as read after it.
    const d = diff(seen, stale, logged, new Set([stale.channels.team!.id]), Date.now());
    const a = inspectLook(first.shown, { state: stale, logged, lines: d.lines, now: Date.now() });
    const brief = (ops: InspectOp[]) =>
      ops.map((o) => (o.op === 'event' ? `${o.id} ${o.event.type}` : `${o.op} ${o.id}`));
    expect(brief(a.ops)).toEqual([`envelope:${id} PULL`, `snapshot envelope:${id}`]);
    const fresh = await rt.store.read();
    const b = inspectLook(a.shown, { state: fresh, logged, lines: [], now: Date.now() });
    expect(brief(b.ops)).toEqual(['channel:team HAND_OVER', 'snapshot channel:team']);
    expect(b.shown.carried.size).toBe(0);
  });

  it('the counted fields are what the channel machine writes: SEND the rate, HAND_OVER delivered_total', () => {
    const p = MACHINES.channel;
    const record = {
      ...channelRecordOf(
        {
          created_at: 0,
          paused_at: null,
          lifecycle_at: null,
          rate: { window_start: 0, count: 0 },
          rate_limit: 10,
          max_hops: 5,
          stale_event_ms: 1000,
          budgets: { max_runtime_ms: null, max_delivered_messages: null },
          delivered_total: 0,
        },
        'active',
        false,
      ),
    };
    const moved = (event: object) => {
      const before = p.toState(record).context as unknown as Record<string, unknown>;
      const after = step(p as never, record as never, event as never).record as Record<string, unknown>;
      return Object.keys(before).filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
    };
    expect(moved({ type: 'SEND', now: 5000, hop: 0, content_key: 'k', seen_at: null })).toEqual([COUNTED.SEND]);
    expect(moved({ type: 'HAND_OVER', now: 5000, count: 1 })).toEqual([COUNTED.HAND_OVER]);
  });
});
