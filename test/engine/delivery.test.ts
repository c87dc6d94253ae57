// FEATURES.md §12 Delivery at engine level (DLV-1..5, 7..11): drain → Prompt effect → commit or
// requeue; the sweep with an `alive` predicate; cooldowns and retries via `now`; stale windows for
// push vs pull; budgets. DLV-6 (kill -9) and DLV-12 (a busy OpenCode session) need real processes
// or the host; their engine halves (sweep, `hold: 'busy'`) are covered here.
import { describe, expect, it } from 'vitest';
import { nextDue, pendingRecipients } from '../../src/engine/index.ts';
import { BATCH_SEPARATOR } from '../../src/framing.ts';
import { checkTrail, dataOf, idsOf, mustPrompt, promptOf, Sim } from './fixtures.ts';

function pair(modeB: 'push' | 'pull' | 'spawn_push' = 'push', args: Record<string, unknown> = {}) {
  const sim = new Sim();
  sim.channel(
    'team',
    [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer', modeB],
    ],
    args,
  );
  return sim;
}

const sendN = (sim: Sim, n: number, from = 'sess_a', prefix = 'm') =>
  Array.from({ length: n }, (_, i) => idsOf(sim.send(from, 'team', `${prefix}${i}`))[0]!);

describe('DLV-1 drain and commit', () => {
  it('a drain hands each envelope over once, in order; commit sets delivered and delivery_method', () => {
    const sim = pair();
    const ids = sendN(sim, 3);
    const d = sim.drain('sess_b');
    expect(d.changed).toBe(true);
    const p = mustPrompt(d);
    expect(p).toMatchObject({
      type: 'Prompt',
      recipient: 'sess_b',
      channel_ids: [sim.ch('team').id],
      message_ids: ids,
      mode: 'push',
    });
    expect(p.text.split(BATCH_SEPARATOR)).toHaveLength(3);
    expect(p.text.indexOf('m0')).toBeLessThan(p.text.indexOf('m1'));
    expect(p.text.indexOf('m1')).toBeLessThan(p.text.indexOf('m2'));
    for (const id of ids)
      expect(sim.msg(id)).toMatchObject({
        delivery_status: 'in_flight',
        attempts: 1,
        in_flight_by: 'p1@host',
        in_flight_at: sim.now,
        delivered_at: null,
      });
    expect(sim.queue('sess_b')).toEqual([]);
    expect(ids.map((id) => sim.state.delivered_to[id])).toEqual([['sess_b'], ['sess_b'], ['sess_b']]);
    expect(sim.ch('team').delivered_total).toBe(3);
    expect(sim.ch('team').cooldown_until.sess_b).toBe(sim.now + 1000);

    // Nothing is handed over twice.
    const again = sim.drain('sess_b');
    expect(promptOf(again)).toBeUndefined();

    sim.advance(10);
    const c = sim.commit(p);
    expect(c.changed).toBe(true);
    expect(dataOf(c).delivered).toEqual(ids);
    for (const id of ids) {
      expect(sim.msg(id)).toMatchObject({
        delivery_status: 'delivered',
        delivery_method: 'push',
        delivered_at: sim.now,
        in_flight_by: null,
        in_flight_at: null,
      });
      checkTrail(sim.msg(id));
      expect(sim.msg(id).transitions.map((t) => t[0])).toEqual(['SEND', 'DRAIN', 'COMMIT']);
    }
    // A second commit of the same batch is a no-op.
    expect(sim.commit(p).changed).toBe(false);
    expect(promptOf(sim.advance(5000).drain('sess_b'))).toBeUndefined();
  });

  it('spawn_push commits record their method; batches hold at most 20 or opts.max', () => {
    const sim = pair('spawn_push', { rate_limit: 100 });
    const ids = sendN(sim, 25);
    const p = mustPrompt(sim.drain('sess_b', { max: 4 }));
    expect(p.mode).toBe('spawn_push');
    expect(p.message_ids).toEqual(ids.slice(0, 4));
    sim.commit(p, 'spawn_push');
    expect(sim.msg(ids[0]!).delivery_method).toBe('spawn_push');
    sim.advance(1000);
    const p2 = mustPrompt(sim.drain('sess_b'));
    expect(p2.message_ids).toEqual(ids.slice(4, 24));
    sim.commit(p2, 'spawn_push');
    sim.advance(1000);
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual(ids.slice(24));
  });

  it('the in-flight guard: no second batch while one is out for the same recipient and channel', () => {
    const sim = pair();
    const [m0] = sendN(sim, 1);
    const p = mustPrompt(sim.drain('sess_b'));
    sim.advance(5000);
    const [m1] = sendN(sim, 1, 'sess_a', 'later');
    const second = sim.drain('sess_b');
    expect(promptOf(second)).toBeUndefined();
    expect(sim.msg(m1!).delivery_status).toBe('pending');
    sim.commit(p);
    expect(sim.msg(m0!).delivery_status).toBe('delivered');
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual([m1]);
  });
});

describe('DLV-2 pause', () => {
  it('pause holds delivery; resume releases it and wakes the recipients', () => {
    const sim = pair();
    const ids = sendN(sim, 2);
    const pa = sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    expect(dataOf(pa)).toEqual({ paused: true, changed: true });
    expect(sim.ch('team').paused_at).toBe(sim.now);
    expect(dataOf(sim.ok({ op: 'pause', sid: 'sess_b', args: { channel: 'team' } }))).toEqual({
      paused: true,
      changed: false,
    });
    const held = sim.drain('sess_b');
    expect(promptOf(held)).toBeUndefined();
    expect(sim.ch('team').holds.sess_b).toBe('paused');
    expect(ids.map((id) => sim.msg(id).delivery_status)).toEqual(['pending', 'pending']);
    expect(sim.queue('sess_b')).toEqual(ids);
    const re = sim.ok({ op: 'resume', sid: 'sess_b', args: { channel: 'team' } });
    expect(dataOf(re)).toEqual({ paused: false, changed: true });
    expect(re.effects).toEqual([{ type: 'Wake', recipients: ['sess_b'] }]);
    const again = sim.ok({ op: 'resume', sid: 'sess_b', args: { channel: 'team' } });
    expect(again.changed).toBe(false);
    expect(again.effects).toEqual([]);
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual(ids);
    expect(sim.ch('team').holds.sess_b).toBeUndefined();
  });

  it('pause holds pull too', () => {
    const sim = pair('pull');
    sendN(sim, 1);
    sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    const o = sim.ok({ op: 'pull', sid: 'sess_b', args: {} });
    expect(dataOf(o)).toMatchObject({ messages: [], remaining: 1 });
    // Not an empty inbox: the answer names the pause and how many wait behind it.
    expect(o.result.message).toBe(
      'No message can be handed over now; 1 pending. 1 wait on "team", which is paused; they are handed over when it is resumed.',
    );
  });
});

describe('DLV-3 stale windows', () => {
  it('a push envelope older than 300000 ms goes stale at drain; exactly 300000 does not', () => {
    const sim = pair();
    const [old] = sendN(sim, 1);
    sim.advance(1);
    const [young] = sendN(sim, 1, 'sess_a', 'young');
    expect(nextDue(sim.state, ['sess_b'], { now: sim.now })).toBe(sim.msg(old!).timestamp + 300001);
    sim.advance(300_000);
    const d = sim.drain('sess_b');
    expect(sim.msg(old!).delivery_status).toBe('stale');
    expect(mustPrompt(d).message_ids).toEqual([young]);
    expect(sim.msg(old!).transitions.map((t) => t[0])).toEqual(['SEND', 'TICK']);
    checkTrail(sim.msg(old!));
  });

  it('mail held by a pause does not age out, and held mail sets no deadline (§5.1 order)', () => {
    const sim = pair();
    const [id] = sendN(sim, 1);
    sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    sim.advance(10 * 300_000);
    expect(nextDue(sim.state, ['sess_b'], { now: sim.now })).toBeNull();
    expect(promptOf(sim.drain('sess_b'))).toBeUndefined();
    expect(sim.msg(id!).delivery_status).toBe('pending');
    sim.ok({ op: 'resume', sid: 'sess_a', args: { channel: 'team' } });
    sim.drain('sess_b');
    expect(sim.msg(id!).delivery_status).toBe('stale'); // past its window once released
  });

  it('the same age on a pull member is still delivered', () => {
    const sim = pair('pull');
    const [id] = sendN(sim, 1);
    expect(nextDue(sim.state, ['sess_b'], { now: sim.now })).toBeNull();
    sim.advance(10 * 300_000);
    const o = sim.ok({ op: 'pull', sid: 'sess_b', args: { channel: 'team' } });
    expect(dataOf(o).message_ids).toEqual([id]);
    expect(sim.msg(id!)).toMatchObject({
      delivery_status: 'delivered',
      delivery_method: 'pull',
      delivered_at: sim.now,
      attempts: 1,
    });
    expect(sim.ch('team').delivered_total).toBe(1);
    expect(sim.queue('sess_b')).toEqual([]);
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_b', args: { channel: 'team' } })).message_ids).toEqual([]);
  });
});

describe('DLV-4 cooldown', () => {
  it('a second push batch within 1000 ms waits and is delivered at the scheduled time', () => {
    const sim = pair();
    sendN(sim, 1);
    const t0 = sim.now;
    sim.commit(mustPrompt(sim.drain('sess_b')));
    sim.advance(400);
    const [second] = sendN(sim, 1, 'sess_a', 'second');
    const held = sim.drain('sess_b');
    expect(promptOf(held)).toBeUndefined();
    expect(held.effects).toContainEqual({ type: 'ScheduleAt', recipient: 'sess_b', at: t0 + 1000 });
    expect(nextDue(sim.state, ['sess_b'], { now: sim.now })).toBe(t0 + 1000);
    sim.now = t0 + 999;
    expect(promptOf(sim.drain('sess_b'))).toBeUndefined();
    sim.now = t0 + 1000;
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual([second]);
  });

  it('pull is not delayed and sets no cooldown', () => {
    const sim = pair('pull');
    sendN(sim, 1);
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_b', args: {} })).message_ids).toHaveLength(1);
    const [next] = sendN(sim, 1, 'sess_a', 'next');
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_b', args: {} })).message_ids).toEqual([next]);
    expect(sim.ch('team').cooldown_until).toEqual({});
    // A second pull returns nothing new.
    const empty = sim.run({ op: 'pull', sid: 'sess_b', args: {} });
    expect(dataOf(empty)).toMatchObject({ messages: [], remaining: 0 });
    expect(empty.changed).toBe(false);
  });
});

describe('DLV-5 failed prompt', () => {
  it('requeues in FIFO order as pending, logs an error, and retries once after 2000 ms', () => {
    const sim = pair();
    const batch = sendN(sim, 3);
    const p = mustPrompt(sim.drain('sess_b'));
    const later = sendN(sim, 2, 'sess_a', 'later');
    sim.advance(50);
    const r = sim.requeue(p, 'ECONNRESET');
    expect(r.result.ok).toBe(true);
    expect(dataOf(r)).toEqual({ requeued: 3, failed: 0 });
    expect(sim.queue('sess_b')).toEqual([...batch, ...later]);
    for (const id of batch)
      expect(sim.msg(id)).toMatchObject({
        delivery_status: 'pending',
        attempts: 1,
        in_flight_by: null,
        in_flight_at: null,
      });
    const err = sim.state.errors.at(-1)!;
    expect(err).toMatchObject({
      reason: 'delivery_failed',
      session_id: 'sess_b',
      channel_id: sim.ch('team').id,
      at: sim.now,
    });
    expect(err.message).toContain('ECONNRESET');
    expect(err.message).toContain('3 re-queued');
    expect(r.effects).toEqual([{ type: 'ScheduleAt', recipient: 'sess_b', at: sim.now + 2000 }]);
    sim.advance(1999);
    expect(promptOf(sim.drain('sess_b'))).toBeUndefined();
    sim.advance(1);
    const retry = mustPrompt(sim.drain('sess_b'));
    expect(retry.message_ids).toEqual([...batch, ...later]);
    expect(sim.msg(batch[0]!).attempts).toBe(2);
    expect(sim.msg(later[0]!).attempts).toBe(1);
    // A requeue of nothing in flight changes nothing.
    sim.commit(retry);
    expect(sim.requeue(retry).changed).toBe(false);
  });
});

describe('DLV-7 sweep', () => {
  it('is a no-op after a commit', () => {
    const sim = pair();
    sendN(sim, 2);
    sim.commit(mustPrompt(sim.drain('sess_b')));
    const s = sim.run({ op: 'sweep', alive: (by) => by === 'p1@host' });
    expect(s.changed).toBe(false);
    expect(dataOf(s)).toEqual({ requeued: 0, failed: 0, released: 0 });
  });

  it('releases the sessions of processes that are gone, in the same mutation, and only theirs', () => {
    const sim = pair();
    const ids = sendN(sim, 1);
    sim.drain('sess_b');
    sim.ch('team').members[0]!.owner = 'p7@elsewhere';
    const s = sim.run({ op: 'sweep', alive: (by) => by === 'p7@elsewhere' });
    expect(dataOf(s)).toEqual({ requeued: 1, failed: 0, released: 1 });
    expect(sim.ch('team').members.map((m) => m.owner)).toEqual(['p7@elsewhere', null]);
    expect(sim.msg(ids[0]!).delivery_status).toBe('pending');
  });

  it('leaves a live process’s in-flight mail alone', () => {
    const sim = pair();
    const ids = sendN(sim, 2);
    sim.drain('sess_b');
    const seen: string[] = [];
    const s = sim.run({
      op: 'sweep',
      alive: (by) => {
        seen.push(by);
        return by === 'p1@host';
      },
    });
    expect(seen).toContain('p1@host');
    expect(s.changed).toBe(false);
    expect(ids.map((id) => sim.msg(id).delivery_status)).toEqual(['in_flight', 'in_flight']);
  });

  it('requeues a dead process’s batch; mixed in_flight + pending keeps FIFO', () => {
    const sim = pair();
    const ids = sendN(sim, 4);
    sim.drain('sess_b', { max: 2 });
    sim.advance(10);
    ids.push(...sendN(sim, 1, 'sess_a', 'late'));
    expect(sim.queue('sess_b')).toEqual(ids.slice(2));
    sim.by = 'p2@host';
    const s = sim.run({ op: 'sweep', alive: (by) => by === 'p2@host' });
    expect(dataOf(s)).toEqual({ requeued: 2, failed: 0, released: 2 });
    expect(s.effects).toEqual([{ type: 'Wake', recipients: ['sess_b'] }]);
    expect(sim.queue('sess_b')).toEqual(ids);
    expect(sim.msg(ids[0]!)).toMatchObject({ delivery_status: 'pending', in_flight_by: null, attempts: 1 });
    expect(sim.state.errors.at(-1)).toMatchObject({ reason: 'in_flight_swept' });
    expect(sim.state.errors.at(-1)!.message).toContain('2');
    // The swept recipient may be drained again at once (no retry delay after a crash)...
    sim.advance(1000);
    const p = mustPrompt(sim.drain('sess_b'));
    expect(p.message_ids).toEqual(ids);
    for (const id of ids) checkTrail(sim.msg(id));
  });

  it('unrecorded in_flight_by counts as gone', () => {
    const sim = pair();
    const [id] = sendN(sim, 1);
    sim.by = '';
    sim.drain('sess_b');
    sim.state.messages[id!]!.in_flight_by = null;
    expect(dataOf(sim.run({ op: 'sweep', alive: () => true }))).toEqual({ requeued: 1, failed: 0, released: 0 });
  });
});

describe('DLV-8 pending recipients', () => {
  it('names only recipients with pending mail', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
      ['sess_c', 'Tester', 'pull'],
    ]);
    expect(pendingRecipients(sim.state)).toEqual([]);
    sim.send('sess_a', 'team', 'x', { to: 'sess_b' });
    sim.send('sess_a', 'team', 'y', { to: 'sess_c' });
    expect(pendingRecipients(sim.state).sort()).toEqual(['sess_b', 'sess_c']);
    expect(pendingRecipients(sim.state, (sid) => sid === 'sess_b')).toEqual(['sess_b']);
    sim.drain('sess_b');
    expect(pendingRecipients(sim.state)).toEqual(['sess_c']);
    sim.ok({ op: 'pull', sid: 'sess_c', args: {} });
    expect(pendingRecipients(sim.state)).toEqual([]);
  });
});

describe('DLV-9 dead letter', () => {
  it('the 5th failed attempt → failed, off the queue, logged', () => {
    const sim = pair();
    const [id] = sendN(sim, 1);
    for (let attempt = 1; attempt <= 5; attempt++) {
      const p = mustPrompt(sim.drain('sess_b'));
      expect(sim.msg(id!).attempts).toBe(attempt);
      const r = sim.requeue(p);
      sim.advance(2000);
      if (attempt < 5) expect(sim.msg(id!).delivery_status).toBe('pending');
      else {
        expect(dataOf(r)).toEqual({ requeued: 0, failed: 1 });
        expect(sim.state.errors.at(-1)!.message).toMatch(/dead-letter/);
      }
    }
    expect(sim.msg(id!)).toMatchObject({ delivery_status: 'failed', attempts: 5, in_flight_by: null });
    expect(sim.queue('sess_b')).toEqual([]);
    expect(promptOf(sim.drain('sess_b'))).toBeUndefined();
    checkTrail(sim.msg(id!));
  });

  it('a sweep at 5 attempts dead-letters too', () => {
    const sim = pair();
    const [id] = sendN(sim, 1);
    for (let i = 0; i < 4; i++) {
      sim.requeue(mustPrompt(sim.drain('sess_b')));
      sim.advance(2000);
    }
    sim.drain('sess_b');
    expect(sim.msg(id!).attempts).toBe(5);
    expect(dataOf(sim.run({ op: 'sweep', alive: () => false }))).toMatchObject({ requeued: 0, failed: 1 });
    expect(sim.msg(id!).delivery_status).toBe('failed');
    expect(sim.queue('sess_b')).toEqual([]);
  });
});

describe('DLV-10 budgets', () => {
  it('the message budget caps hand-overs, retries included, and gates every queued hand-over', () => {
    const sim = pair('push', { budget_messages: 3, rate_limit: 100 });
    const ids = sendN(sim, 5);
    const p = mustPrompt(sim.drain('sess_b'));
    expect(p.message_ids).toEqual(ids.slice(0, 3));
    expect(sim.ch('team').delivered_total).toBe(3);
    const refused = sim.refuse(
      { op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'more' } },
      'budget_exhausted',
    );
    expect(dataOf(refused).budget).toBe('messages');
    sim.requeue(p);
    sim.advance(2000);
    const held = sim.drain('sess_b');
    expect(promptOf(held)).toBeUndefined();
    expect(sim.ch('team').holds.sess_b).toBe('budget');
    expect(ids.map((id) => sim.msg(id).delivery_status)).toEqual(Array(5).fill('pending'));
    expect(sim.queue('sess_b')).toEqual(ids);
    expect(sim.ch('team').delivered_total).toBe(3);
  });

  it('a retry counts as a hand-over', () => {
    const sim = pair('push', { budget_messages: 2 });
    const [id] = sendN(sim, 1);
    sim.requeue(mustPrompt(sim.drain('sess_b')));
    sim.advance(2000);
    sim.requeue(mustPrompt(sim.drain('sess_b')));
    expect(sim.ch('team').delivered_total).toBe(2);
    sim.advance(2000);
    expect(promptOf(sim.drain('sess_b'))).toBeUndefined();
    expect(sim.msg(id!).attempts).toBe(2);
  });

  it('a batch stops at the budget mid-way; pull respects it too', () => {
    const sim = pair('pull', { budget_messages: 2 });
    const ids = sendN(sim, 3);
    const o = sim.ok({ op: 'pull', sid: 'sess_b', args: {} });
    expect(dataOf(o)).toMatchObject({ message_ids: ids.slice(0, 2), remaining: 1 });
    expect(sim.ch('team').delivered_total).toBe(2);
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_b', args: {} })).message_ids).toEqual([]);
  });

  it('an expired runtime budget refuses sends and holds mail without dropping it', () => {
    const sim = pair('push', { budget_runtime_ms: 60_000 });
    const ids = sendN(sim, 2);
    sim.advance(60_001);
    const r = sim.refuse({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'late' } }, 'budget_exhausted');
    expect(dataOf(r).budget).toBe('runtime');
    const d = sim.drain('sess_b');
    expect(promptOf(d)).toBeUndefined();
    expect(sim.ch('team').holds.sess_b).toBe('budget');
    expect(sim.queue('sess_b')).toEqual(ids);
    expect(ids.map((id) => sim.msg(id).delivery_status)).toEqual(['pending', 'pending']);
  });
});

describe('DLV-11 cleanup is persisted even when nothing is prompted', () => {
  const staleAtDrain = (sim: Sim) => {
    const [id] = sendN(sim, 1);
    sim.advance(300_001);
    const d = sim.drain('sess_b');
    expect(promptOf(d)).toBeUndefined();
    expect(d.changed).toBe(true);
    expect(sim.msg(id!).delivery_status).toBe('stale');
    expect(sim.queue('sess_b')).toEqual([]);
    expect(sim.state.queues.sess_b).toBeUndefined();
  };

  it('stale envelopes (push)', () => staleAtDrain(pair('push')));

  it('stale envelopes (spawn_push, while the member passes the spawn gate)', () => {
    const sim = pair('spawn_push');
    sim.spawnHosts = ['host-mcp'];
    sim.member('team', 'sess_b').host_session_id = 'thread-b';
    staleAtDrain(sim);
  });
});

describe("SPN-3 an ineligible spawn_push member's mail waits and never ages out (§1.1)", () => {
  const aged = (setup: (sim: Sim) => void) => {
    const sim = pair('spawn_push');
    setup(sim);
    const [id] = sendN(sim, 1);
    sim.advance(3_600_000);
    expect(sim.msg(id!).delivery_status).toBe('pending');
    expect(nextDue(sim.state, ['sess_b'], sim.env())).toBeNull();
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_b', args: {} })).message_ids).toEqual([id]);
  };

  it('unbound (no host session id)', () =>
    aged((sim) => {
      sim.spawnHosts = ['host-mcp'];
    }));
  it('a host with no argv contract', () =>
    aged((sim) => {
      sim.member('team', 'sess_b').host_session_id = 'thread-b';
    }));
  it('capabilities without resume', () =>
    aged((sim) => {
      sim.spawnHosts = ['host-mcp'];
      const m = sim.member('team', 'sess_b');
      m.host_session_id = 'thread-b';
      m.endpoint_capabilities.resume = false;
    }));
});

describe('DLV-11 dead entries', () => {
  it('rejected envelopes of a recipient no longer on the channel; dead queue entries', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
      ['sess_c', 'Tester'],
    ]);
    const [id] = idsOf(sim.send('sess_a', 'team', 'x', { to: 'sess_b' }));
    const p = mustPrompt(sim.drain('sess_b'));
    sim.ok({ op: 'kick', caller: 'sess_a', args: { channel: 'team', target_session_id: 'sess_b' } });
    sim.requeue(p);
    expect(sim.msg(id!).delivery_status).toBe('pending');
    sim.advance(2000);
    sim.state.queues.sess_b!.push(`ocm_${'e'.repeat(32)}`);
    const d = sim.drain('sess_b');
    expect(promptOf(d)).toBeUndefined();
    expect(d.changed).toBe(true);
    expect(sim.msg(id!).delivery_status).toBe('rejected');
    expect(sim.state.queues.sess_b).toBeUndefined();
    checkTrail(sim.msg(id!));
  });

  it('a drain with nothing to do reports no change', () => {
    const sim = pair();
    expect(sim.drain('sess_b').changed).toBe(false);
  });
});

describe('holds the shell knows (DLV-12 engine half, stale members)', () => {
  it('a busy host holds the batch; the next drain without the hold delivers it', () => {
    const sim = pair();
    const ids = sendN(sim, 1);
    const d = sim.drain('sess_b', { hold: 'busy' });
    expect(promptOf(d)).toBeUndefined();
    expect(sim.ch('team').holds.sess_b).toBe('busy');
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual(ids);
  });

  it('a stale member receives nothing until it is cleared', () => {
    const sim = pair();
    const ids = sendN(sim, 1);
    sim.ok({ op: 'mark_stale', session: 'sess_b' });
    expect(promptOf(sim.drain('sess_b'))).toBeUndefined();
    expect(sim.ch('team').holds.sess_b).toBe('stale');
    sim.ok({ op: 'clear_stale', session: 'sess_b' });
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual(ids);
  });

  it("a host session's end marks a push member stale, not a spawn_push one (each spawned run ends its session)", () => {
    for (const [mode, stale] of [
      ['push', true],
      ['spawn_push', false],
    ] as const) {
      const sim = pair(mode);
      sim.ok({ op: 'session_end', session: 'sess_b' });
      expect(sim.member('team', 'sess_b').stale, mode).toBe(stale);
      expect(sim.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'next' } }).result.ok, mode).toBe(
        !stale,
      );
    }
  });
});

describe('pull (§5.6; engine half of MCP-4)', () => {
  it('drains and commits in one mutation; `channel` leaves other channels’ mail queued; new mail comes at once', () => {
    const sim = new Sim();
    sim.channel('one', [
      ['sess_a', 'Lead'],
      ['sess_p', 'Reader', 'pull'],
    ]);
    sim.channel('two', [
      ['sess_a', 'Lead'],
      ['sess_p', 'Reader', 'pull'],
    ]);
    const x = idsOf(sim.send('sess_a', 'one', 'x'))[0]!;
    const y = idsOf(sim.send('sess_a', 'two', 'y'))[0]!;
    const z = idsOf(sim.send('sess_a', 'one', 'z'))[0]!;
    const o = sim.ok({ op: 'pull', sid: 'sess_p', args: { channel: 'one', limit: 1 } });
    expect(o.changed).toBe(true);
    expect(dataOf(o)).toMatchObject({ message_ids: [x], remaining: 1 });
    expect(
      dataOf<{ messages: { channel: string; message_id: string; framed: string }[] }>(o).messages[0],
    ).toMatchObject({ channel: 'one', message_id: x });
    expect(sim.msg(x)).toMatchObject({ delivery_status: 'delivered', delivery_method: 'pull', attempts: 1 });
    expect(sim.queue('sess_p')).toEqual([y, z]);
    const all = sim.ok({ op: 'pull', sid: 'sess_p', args: {} });
    expect(dataOf(all)).toMatchObject({ message_ids: [y, z], remaining: 0 });
    const w = idsOf(sim.send('sess_a', 'two', 'w'))[0]!;
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_p', args: {} })).message_ids).toEqual([w]);
  });

  it('hook reads record delivery_method push', () => {
    const sim = pair('spawn_push');
    const [id] = sendN(sim, 1);
    sim.ok({ op: 'pull', sid: 'sess_b', args: {}, method: 'push' });
    expect(sim.msg(id!)).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push' });
  });

  it('a hook read (push) takes nothing while a batch of the recipient is in flight; the pull tool still reads', () => {
    const sim = pair();
    const ids = sendN(sim, 3);
    const batch = mustPrompt(sim.drain('sess_b', { max: 1 }));
    const held = sim.ok({ op: 'pull', sid: 'sess_b', args: {}, method: 'push' });
    expect(dataOf(held)).toMatchObject({ message_ids: [], remaining: 2 });
    expect(sim.queue('sess_b')).toEqual(ids.slice(1));
    // Committed: the next hook read hands the rest over, oldest first.
    sim.commit(batch);
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_b', args: {}, method: 'push' })).message_ids).toEqual(ids.slice(1));
    // The explicit tool is the member's own request: it is not held.
    const more = sendN(sim, 2, 'sess_a', 'n');
    sim.advance(1000); // the first batch's cooldown
    mustPrompt(sim.drain('sess_b', { max: 1 }));
    expect(dataOf(sim.ok({ op: 'pull', sid: 'sess_b', args: {} })).message_ids).toEqual(more.slice(1));
  });

  it('refusals in order: channel_not_found, lifecycle_refused, not_member, pull_not_allowed', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_u', 'Mute'],
    ]);
    sim.refuse({ op: 'pull', sid: 'sess_u', args: { channel: 'ghost' } }, 'channel_not_found');
    sim.refuse({ op: 'pull', sid: 'sess_z', args: { channel: 'team' } }, 'not_member');
    sim.member('team', 'sess_u').endpoint_capabilities.pull = false;
    sim.refuse({ op: 'pull', sid: 'sess_u', args: { channel: 'team' } }, 'pull_not_allowed');
    sim.refuse({ op: 'pull', sid: 'sess_u', args: {} }, 'pull_not_allowed');
    sim.ok({
      op: 'save_session',
      actor: { operator: true, project_id: 'x', worktree: '/x' },
      args: { channel: 'team' },
    });
    sim.refuse({ op: 'pull', sid: 'sess_u', args: { channel: 'team' } }, 'lifecycle_refused');
  });

  it('a caller in no channel pulls nothing', () => {
    const sim = new Sim();
    const o = sim.ok({ op: 'pull', sid: 'sess_nobody', args: {} });
    expect(o.changed).toBe(false);
    expect(dataOf(o)).toMatchObject({ messages: [], remaining: 0 });
  });
});
