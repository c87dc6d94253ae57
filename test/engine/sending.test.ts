// FEATURES.md §12 Sending (SND-1..6, 8, 9), §5.3 recipient resolution and the send check order.
// SND-7 (simultaneous senders in several processes) needs the store's lock and real processes; it
// belongs to the store/runtime suites. Its engine half (FIFO per recipient) is a property test.
import { describe, expect, it } from 'vitest';
import { apply, plan } from '../../src/engine/index.ts';
import { applyOps } from '../../src/protocol/draft.ts';
import { MAX_PERSISTED_MESSAGES, MAX_PROCESSED_CORRELATIONS } from '../../src/protocol/limits.ts';
import { EnvelopeSchema } from '../../src/protocol/schema.ts';
import { dataOf, idsOf, mustPrompt, Sim } from './fixtures.ts';

const sendCmd = (sid: string, args: Record<string, unknown>) =>
  ({ op: 'send', sid, args: { channel: 'team', content: 'hello', ...args } }) as const;

function trio() {
  const sim = new Sim();
  sim.channel('team', [
    ['sess_a', 'Lead'],
    ['sess_b', 'Reviewer'],
    ['sess_c', 'Tester'],
  ]);
  return sim;
}

describe('SND-1 recipients are never guessed', () => {
  it('3+ members need `to` or `broadcast`', () => {
    const sim = trio();
    const o = sim.refuse(sendCmd('sess_a', {}), 'recipient_ambiguous');
    expect(dataOf(o).members).toEqual(['Reviewer (sess_b)', 'Tester (sess_c)']);
    expect(o.result.message).toMatch(/`to`|broadcast/);
    sim.send('sess_a', 'team', 'to one', { to: 'sess_c' });
    sim.send('sess_a', 'team', 'to all', { broadcast: true });
  });

  it('§5.3: to+broadcast, self, unknown, stale, alone', () => {
    const sim = trio();
    expect(dataOf(sim.refuse(sendCmd('sess_a', { to: 'sess_b', broadcast: true }), 'invalid_argument')).field).toBe(
      'to',
    );
    sim.refuse(sendCmd('sess_a', { to: 'sess_a' }), 'recipient_not_found');
    sim.refuse(sendCmd('sess_a', { to: 'lead' }), 'recipient_not_found');
    const nf = sim.refuse(sendCmd('sess_a', { to: 'Designer' }), 'recipient_not_found');
    expect(dataOf(nf).members).toEqual(['Reviewer (sess_b)', 'Tester (sess_c)']);
    // Session id wins over a role of the same spelling.
    sim.join('sess_d', 'team', 'sess_c');
    const byId = sim.send('sess_a', 'team', 'by id', { to: 'sess_c' });
    expect(sim.msg(idsOf(byId)[0]!).recipient_session_id).toBe('sess_c');
    sim.ok({ op: 'mark_stale', session: 'sess_b' });
    sim.refuse(sendCmd('sess_a', { to: 'reviewer' }), 'recipient_stale');
    const b = sim.send('sess_a', 'team', 'all', { broadcast: true });
    expect(dataOf<{ recipients: { session_id: string }[] }>(b).recipients.map((r) => r.session_id)).toEqual([
      'sess_c',
      'sess_d',
    ]);

    const solo = new Sim();
    solo.create('sess_a', 'team', 'Lead');
    solo.refuse(sendCmd('sess_a', {}), 'no_recipient');
    solo.refuse(sendCmd('sess_a', { broadcast: true }), 'no_recipient');
    solo.join('sess_b', 'team', 'Reviewer');
    solo.ok({ op: 'mark_stale', session: 'sess_b' });
    solo.refuse(sendCmd('sess_a', {}), 'recipient_stale');
    solo.refuse(sendCmd('sess_a', { broadcast: true }), 'recipient_stale');
  });
});

describe('SND-2 a 2-member send', () => {
  it('queues one full envelope for the peer', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    const o = sim.send('sess_a', 'team', 'Please review PR 7.', { type: 'review_request' });
    const [id] = idsOf(o);
    const e = sim.msg(id!);
    expect(e).toEqual({
      message_id: id,
      channel_id: sim.ch('team').id,
      sender_session_id: 'sess_a',
      sender_role: 'Lead',
      recipient_session_id: 'sess_b',
      recipient_role: 'Reviewer',
      timestamp: sim.now,
      message_type: 'review_request',
      content: 'Please review PR 7.',
      reply_to: null,
      hop_count: 0,
      correlation_id: dataOf(o).correlation_id,
      root_message_id: null,
      delivery_status: 'pending',
      delivered_at: null,
      attempts: 0,
      delivery_method: null,
      in_flight_by: null,
      in_flight_at: null,
      transitions: [['SEND', 'pending', sim.now]],
    });
    expect(e.message_id).toMatch(/^ocm_[0-9a-f]{32}$/);
    expect(e.correlation_id).toMatch(/^cor_[0-9a-f]{32}$/);
    expect(EnvelopeSchema.parse(e)).toEqual(e);
    expect(sim.state.queues).toEqual({ sess_b: [id] });
    expect(Object.keys(sim.state.messages)).toEqual([id]);
    expect(o.effects).toEqual([{ type: 'Wake', recipients: ['sess_b'] }]);
    expect(dataOf(o)).toMatchObject({
      message_ids: [id],
      recipients: [{ session_id: 'sess_b', role: 'Reviewer', delivery_mode: 'push' }],
      delivery_status: 'pending',
      hop_count: 0,
    });
    expect(sim.ch('team').processed_correlations).toEqual([e.correlation_id]);
    expect(sim.ch('team').rate.count).toBe(1);
  });

  it('the default type is manual', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    expect(sim.msg(idsOf(sim.send('sess_a', 'team', 'x'))[0]!).message_type).toBe('manual');
  });
});

describe('SND-3 sender refusals', () => {
  it('non-members, paused channels, system and unknown types', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    const nm = sim.refuse(sendCmd('sess_z', {}), 'not_member');
    expect(nm.result.message).toMatch(/join/i);
    sim.refuse(sendCmd('sess_a', { channel: 'ghost' }), 'channel_not_found');
    const sys = sim.refuse(sendCmd('sess_a', { type: 'system' }), 'invalid_message_type');
    expect(dataOf(sys).valid_types).toEqual(['review_request', 'review_response', 'manual']);
    sim.refuse(sendCmd('sess_a', { type: 'chat' }), 'invalid_message_type');
    sim.refuse(sendCmd('sess_a', { type: 7 }), 'invalid_message_type');
    sim.ok({ op: 'pause', sid: 'sess_b', args: { channel: 'team' } });
    const p = sim.refuse(sendCmd('sess_a', {}), 'channel_paused');
    expect(p.result.message).toMatch(/opencomms_resume/);
  });

  it('checks run in the table order', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
        ['sess_c', 'Tester'],
      ],
      { budget_messages: 1 },
    );
    const worst = { content: ' ', type: 'system', to: 'x', broadcast: true };
    sim.refuse(sendCmd('sess_z', { ...worst, channel: 'ghost' }), 'channel_not_found');
    sim.refuse(sendCmd('sess_z', worst), 'not_member');
    sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    sim.refuse(sendCmd('sess_a', worst), 'channel_paused');
    sim.ok({ op: 'resume', sid: 'sess_a', args: { channel: 'team' } });
    // Exhaust the 1-message budget with one hand-over.
    sim.send('sess_a', 'team', 'first', { to: 'sess_b' });
    sim.drain('sess_b');
    const b = sim.refuse(sendCmd('sess_a', worst), 'budget_exhausted');
    expect(dataOf(b).budget).toBe('messages');

    const s2 = trio();
    s2.refuse(sendCmd('sess_a', worst), 'content_empty');
    s2.refuse(sendCmd('sess_a', { ...worst, content: 'x'.repeat(100001) }), 'content_too_large');
    s2.refuse(sendCmd('sess_a', { ...worst, content: 'ok' }), 'invalid_message_type');
    s2.refuse(sendCmd('sess_a', { content: 'ok', to: 'x', broadcast: true }), 'invalid_argument');
    s2.refuse(sendCmd('sess_a', { content: 'ok', to: 'nobody' }), 'recipient_not_found');
    s2.refuse(sendCmd('sess_a', { content: 'ok' }), 'recipient_ambiguous');
    // Rate before duplicate before hop.
    const s3 = new Sim();
    s3.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 2, max_hops: 1 },
    );
    const m1 = idsOf(s3.send('sess_a', 'team', 'one'))[0]!;
    const m2 = idsOf(s3.send('sess_b', 'team', 'two', { reply_to: m1 }))[0]!;
    s3.refuse(sendCmd('sess_a', { content: 'one', reply_to: m2 }), 'rate_limited');
    s3.advance(60_001);
    s3.refuse(sendCmd('sess_a', { content: 'one', reply_to: m2 }), 'duplicate_content');
    s3.refuse(sendCmd('sess_a', { content: 'three', reply_to: m2 }), 'hop_limit_exceeded');
  });
});

describe('SND-4 duplicate window', () => {
  it('same sender + content within 5 min is refused; another sender may; after 300000 ms it is accepted', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    sim.send('sess_a', 'team', 'LGTM');
    sim.advance(299_999);
    const d = sim.refuse(sendCmd('sess_a', { content: 'LGTM' }), 'duplicate_content');
    expect(d.result.message).toMatch(/do not resend/i);
    sim.send('sess_b', 'team', 'LGTM');
    sim.advance(1);
    sim.send('sess_a', 'team', 'LGTM');
    // The refused duplicate did not refresh the key: it was recorded at T0 + 300000 now.
    expect(Object.values(sim.ch('team').seen_content)).toContain(sim.now);
  });

  it('keeps the newest 100 keys per channel, so hot state does not grow with a raised rate limit', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 1000 },
    );
    for (let i = 0; i < 101; i++) sim.send('sess_a', 'team', `message ${i}`);
    expect(Object.keys(sim.ch('team').seen_content)).toHaveLength(100);
    sim.refuse(sendCmd('sess_a', { content: 'message 100' }), 'duplicate_content');
    sim.send('sess_a', 'team', 'message 0'); // the oldest key made room: accepted again
  });

  it('chain roots: at most MAX_PROCESSED_CORRELATIONS, newest kept, cut back to half at once', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 1000 },
    );
    const roots: string[] = [];
    const lengths: number[] = [];
    for (let i = 0; i < 3 * MAX_PROCESSED_CORRELATIONS; i++) {
      roots.push(sim.msg(idsOf(sim.send('sess_a', 'team', `root ${i}`))[0]!).correlation_id);
      lengths.push(sim.ch('team').processed_correlations.length);
    }
    expect(Math.max(...lengths)).toBe(MAX_PROCESSED_CORRELATIONS);
    const kept = sim.ch('team').processed_correlations;
    expect(kept).toEqual(roots.slice(-kept.length));
    // Each send appends one id; past the cap the list is cut to its newest half in one go.
    for (let i = 1; i < lengths.length; i++)
      expect([
        lengths[i - 1]! + 1,
        lengths[i - 1] === MAX_PROCESSED_CORRELATIONS ? MAX_PROCESSED_CORRELATIONS / 2 : -1,
      ]).toContain(lengths[i]);
  });

  it('expired keys are swept on each send', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    sim.send('sess_a', 'team', 'one');
    sim.send('sess_a', 'team', 'two');
    expect(Object.keys(sim.ch('team').seen_content)).toHaveLength(2);
    sim.advance(300_000);
    sim.send('sess_a', 'team', 'three');
    expect(Object.keys(sim.ch('team').seen_content)).toHaveLength(1);
  });

  it('an expired key is swept wherever it sits in the window, not only at its front', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    sim.send('sess_a', 'team', 'one');
    const window = sim.ch('team').seen_content;
    const [fresh] = Object.keys(window);
    // Out of send order, as a rolled-back write leaves a key it put back: last, but expired.
    window['sess_a:00000000000000000000000000000000'] = sim.now - 300_000;
    sim.advance(1);
    sim.send('sess_a', 'team', 'two');
    expect(Object.keys(sim.ch('team').seen_content)).toEqual([fresh, expect.stringMatching(/^sess_a:/)]);
    expect(Object.keys(sim.ch('team').seen_content)).not.toContain('sess_a:00000000000000000000000000000000');
  });
});

describe('SND-5 reply chains', () => {
  it('hop_count increments, correlation and root are shared; the 6th message with max_hops 4 is refused', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    const ids: string[] = [];
    let parent: string | undefined;
    for (let i = 0; i < 5; i++) {
      const o = sim.send(i % 2 ? 'sess_b' : 'sess_a', 'team', `message ${i}`, parent ? { reply_to: parent } : {});
      expect(dataOf(o).hop_count).toBe(i);
      parent = idsOf(o)[0]!;
      ids.push(parent);
    }
    const [first, ...rest] = ids.map((id) => sim.msg(id));
    expect(first!.root_message_id).toBeNull();
    for (const e of rest) {
      expect(e.correlation_id).toBe(first!.correlation_id);
      expect(e.root_message_id).toBe(first!.message_id);
    }
    expect(rest.map((e) => e.reply_to)).toEqual(ids.slice(0, 4));
    const o = sim.refuse(sendCmd('sess_b', { content: 'message 5', reply_to: parent }), 'hop_limit_exceeded');
    expect(dataOf(o).max_hops).toBe(4);
    expect(o.result.message).toMatch(/stop the loop/i);
    // One chain root recorded.
    expect(sim.ch('team').processed_correlations).toEqual([first!.correlation_id]);
  });

  it('a reply to a parent that already left hot state continues the chain (the shell passes the logged parent)', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    const first = idsOf(sim.send('sess_a', 'team', 'question'))[0]!;
    sim.commit(mustPrompt(sim.drain('sess_b')));
    expect(sim.msg(first).delivery_status).toBe('delivered');
    // The delivered parent left hot state for the log: the engine alone no longer knows it...
    expect(sim.hot(first)).toBeUndefined();
    const logged = sim.history.find((e) => e.message_id === first)!;
    expect(logged).toMatchObject({ message_id: first, delivery_status: 'delivered' });
    const alone = apply(
      structuredClone(sim.state),
      { op: 'send', sid: 'sess_b', args: { channel: 'team', content: 'unlinked', reply_to: first } },
      sim.env(),
    );
    expect(dataOf(alone).hop_count).toBe(0);
    // ...and a reply continues the chain once the shell hands the logged parent in (Sim.prepare does, as the runtime does).
    const reply = sim.send('sess_b', 'team', 'answer', { reply_to: first });
    expect(dataOf(reply).hop_count).toBe(1);
    expect(dataOf(reply).correlation_id).toBe(sim.msg(first).correlation_id);
    expect(sim.msg(idsOf(reply)[0]!).root_message_id).toBe(first);
    // A parent handed in for another id is ignored: new chain.
    const wrong = sim.run({
      op: 'send',
      sid: 'sess_a',
      args: { channel: 'team', content: 'x', reply_to: `ocm_${'9'.repeat(32)}` },
      parent: logged,
    });
    expect(dataOf(wrong).hop_count).toBe(0);
  });

  it('an unknown reply_to, or one from another channel, starts a new chain at hop 0', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    sim.channel('other', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    const foreign = idsOf(sim.send('sess_a', 'other', 'x'))[0]!;
    const u = sim.send('sess_a', 'team', 'y', { reply_to: `ocm_${'f'.repeat(32)}` });
    expect(dataOf(u).hop_count).toBe(0);
    expect(sim.msg(idsOf(u)[0]!).root_message_id).toBeNull();
    const f = sim.send('sess_b', 'team', 'z', { reply_to: foreign });
    expect(dataOf(f).hop_count).toBe(0);
    expect(dataOf(f).correlation_id).not.toBe(sim.msg(foreign).correlation_id);
  });
});

describe('SND-6 an 8-member channel', () => {
  const eight = () => {
    const sim = new Sim();
    sim.channel(
      'team',
      Array.from({ length: 8 }, (_, i) => [`sess_${i}`, `Role ${i}`] as [string, string]),
    );
    return sim;
  };

  it('targeted sends reach only their target', () => {
    const sim = eight();
    for (let i = 1; i < 8; i++) sim.send('sess_0', 'team', `for ${i}`, { to: `Role ${i}` });
    for (let i = 1; i < 8; i++) {
      const mine = sim.envelopesFor(`sess_${i}`);
      expect(mine.map((e) => e.content)).toEqual([`for ${i}`]);
      expect(sim.queue(`sess_${i}`)).toEqual([mine[0]!.message_id]);
    }
    expect(sim.queue('sess_0')).toEqual([]);
  });

  it('a broadcast fans out to the 7 others (stale skipped), sharing ids of the chain, and counts once', () => {
    const sim = eight();
    const all = sim.send('sess_0', 'team', 'all hands', { broadcast: true });
    expect(idsOf(all)).toHaveLength(7);
    const envs = idsOf(all).map((id) => sim.msg(id));
    expect(envs.map((e) => e.recipient_session_id)).toEqual([
      'sess_1',
      'sess_2',
      'sess_3',
      'sess_4',
      'sess_5',
      'sess_6',
      'sess_7',
    ]);
    expect(new Set(envs.map((e) => e.correlation_id)).size).toBe(1);
    expect(new Set(envs.map((e) => e.hop_count)).size).toBe(1);
    expect(sim.ch('team').rate.count).toBe(1);
    sim.ok({ op: 'mark_stale', session: 'sess_3' });
    const b2 = sim.send('sess_0', 'team', 'again', { broadcast: true });
    expect(idsOf(b2)).toHaveLength(6);
    expect(idsOf(b2).map((id) => sim.msg(id).recipient_session_id)).not.toContain('sess_3');
    expect(sim.ch('team').rate.count).toBe(2);
    expect(all.effects).toEqual([{ type: 'Wake', recipients: envs.map((e) => e.recipient_session_id) }]);
  });
});

describe('SND-8 rate limit', () => {
  it('the 21st logical send in a window is refused across all senders; refused sends consume no quota', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
      ['sess_c', 'Tester'],
    ]);
    sim.refuse(sendCmd('sess_a', { content: 'no target' }), 'recipient_ambiguous');
    for (let i = 0; i < 20; i++) {
      const from = ['sess_a', 'sess_b', 'sess_c'][i % 3]!;
      sim.send(
        from,
        'team',
        `m${i}`,
        i % 2 === 0 ? { broadcast: true } : { to: from === 'sess_a' ? 'Tester' : 'Lead' },
      );
      if (i === 5) sim.refuse(sendCmd(from, { content: `m${i}`, broadcast: true }), 'duplicate_content');
    }
    expect(sim.ch('team').rate.count).toBe(20);
    sim.advance(60_000);
    const r = sim.refuse(sendCmd('sess_c', { content: 'm21', to: 'Lead' }), 'rate_limited');
    expect(dataOf(r).rate_limit).toBe(20);
    sim.advance(1);
    sim.send('sess_c', 'team', 'm21', { to: 'Lead' });
    expect(sim.ch('team').rate).toEqual({ window_start: sim.now, count: 1 });
  });

  it('honours a custom rate_limit', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 3 },
    );
    for (let i = 0; i < 3; i++) sim.send('sess_a', 'team', `m${i}`);
    sim.refuse(sendCmd('sess_b', { content: 'x' }), 'rate_limited');
  });
});

describe('SND-9 content size', () => {
  it('blank or over 100000 chars is refused; exactly 100000 is accepted (as parts, test/engine/parts.test.ts)', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    for (const blank of ['', '   ', '\n\t ', null, 5, undefined])
      sim.refuse(sendCmd('sess_a', { content: blank }), 'content_empty');
    const big = sim.refuse(sendCmd('sess_a', { content: 'y'.repeat(100001) }), 'content_too_large');
    expect(big.result.message).toMatch(/split|shorten/i);
    const o = sim.send('sess_a', 'team', 'y'.repeat(100000));
    const [parts] = (o.result.data as { part_message_ids: string[][] }).part_message_ids;
    expect(idsOf(o)[0]).toBe(parts![0]);
    expect(parts!.map((id) => sim.msg(id).content).join('')).toHaveLength(100000);
  });
});

describe('the planned send (the runtime applies its operations with no change tracker)', () => {
  it('writes what the send writes, and leaves a send near the retention cap to the draft path', () => {
    const sim = trio();
    sim.send('sess_a', 'team', 'first', { to: 'sess_b' });
    const cmd = {
      op: 'send',
      sid: 'sess_a',
      args: { channel: 'team', content: 'both', broadcast: true, session_description: 'lead' },
    } as const;
    const viaSend = structuredClone(sim.state);
    const viaPlan = structuredClone(sim.state);
    const counter = sim.counter;
    const sent = apply(viaSend, cmd, sim.env());
    sim.counter = counter; // the same ids minted again
    const planned = plan(viaPlan, cmd, sim.env())!;
    applyOps(viaPlan, planned.ops);
    expect(planned.result).toEqual(sent.result);
    expect(planned.effects).toEqual(sent.effects);
    expect(viaPlan).toEqual(viaSend);
    // A refusal plans no writes.
    expect(plan(sim.state, { ...cmd, args: { ...cmd.args, content: ' ' } }, sim.env())).toMatchObject({
      ops: [],
      result: { ok: false },
    });
    // Near MAX_PERSISTED_MESSAGES retention may have to trim after the send: not planned.
    sim.state.queues.sess_c = Array.from({ length: MAX_PERSISTED_MESSAGES - 1000 }, (_, i) => `ocm_${i}`);
    expect(plan(sim.state, cmd, sim.env())).toBeNull();
  });
});
