// FEATURES.md §12 Reads (RD-1..3): status, inbox, history and archive reads change nothing.
import { describe, expect, it } from 'vitest';
import { BEGIN_MARKER, END_MARKER, UNTRUSTED_NOTICE } from '../../src/framing.ts';
import { dataOf, idsOf, memberActor, mustPrompt, operatorActor, Sim } from './fixtures.ts';

type Msg = { message_id: string; content: string; delivery_status: string; timestamp: number; reply_to: string | null };

function world() {
  const sim = new Sim();
  sim.channel('team', [
    ['sess_a', 'Lead'],
    ['sess_b', 'Reviewer'],
  ]);
  sim.channel('other', [
    ['sess_c', 'Writer'],
    ['sess_d', 'Editor'],
  ]);
  return sim;
}

/** A read answers without changing anything. */
function read(sim: Sim, cmd: Parameters<Sim['run']>[0]) {
  const before = structuredClone(sim.state);
  const o = sim.ok(cmd);
  expect(o.changed).toBe(false);
  expect(o.effects).toEqual([]);
  expect(o.state).toEqual(before);
  return o;
}

describe('RD-1 scope', () => {
  it('history and inbox refuse non-members, missing channels and tombstones', () => {
    const sim = world();
    for (const op of ['history', 'inbox'] as const) {
      sim.refuse({ op, sid: 'sess_c', args: { channel: 'team' } }, 'not_member');
      sim.refuse({ op, sid: 'sess_c', args: { channel: 'ghost' } }, 'channel_not_found');
    }
    sim.ok({ op: 'save_session', actor: memberActor('sess_c'), args: { channel: 'other' } });
    for (const op of ['history', 'inbox'] as const)
      sim.refuse({ op, sid: 'sess_c', args: { channel: 'other' } }, 'lifecycle_refused');
  });

  it('status and its errors cover only the caller’s channels', () => {
    const sim = world();
    sim.send('sess_a', 'team', 'for b');
    sim.send('sess_c', 'other', 'for d');
    sim.requeue(mustPrompt(sim.drain('sess_b')), 'team failure');
    sim.requeue(mustPrompt(sim.drain('sess_d')), 'other failure');
    sim.advance(2000);
    sim.drain('sess_b');
    sim.run({ op: 'sweep', alive: () => false }); // an unscoped, operator-only entry
    expect(sim.state.errors).toHaveLength(3);

    const mine = dataOf<{
      channels: { name: string }[];
      errors: { message: string }[];
      total_messages: number;
      pending_messages: number;
    }>(read(sim, { op: 'status', sid: 'sess_a', args: {} }));
    expect(mine.channels.map((c) => c.name)).toEqual(['team']);
    expect(mine.errors.map((e) => e.message)).toEqual([expect.stringContaining('team failure')]);
    expect(mine.total_messages).toBe(1);
    expect(mine.pending_messages).toBe(1);
    // The recipient of a scoped error sees it too (session_id).
    expect(dataOf<{ errors: unknown[] }>(read(sim, { op: 'status', sid: 'sess_d', args: {} })).errors).toHaveLength(1);
    // A channel the caller is not in gives an empty list.
    const none = dataOf<{ channels: unknown[]; errors: { channel_id?: string }[] }>(
      read(sim, { op: 'status', sid: 'sess_a', args: { channel: 'other' } }),
    );
    expect(none.channels).toEqual([]);
    expect(none.errors.filter((e) => e.channel_id === sim.ch('other').id)).toEqual([]);
    // A stranger sees nothing.
    const stranger = dataOf<{ channels: unknown[]; errors: unknown[] }>(
      read(sim, { op: 'status', sid: 'sess_z', args: {} }),
    );
    expect(stranger).toMatchObject({ channels: [], errors: [], total_messages: 0, pending_messages: 0 });
    // The operator sees every channel and every error.
    const op = dataOf<{ channels: { name: string }[]; errors: unknown[] }>(read(sim, { op: 'operator_status' }));
    expect(op.channels.map((c) => c.name).sort()).toEqual(['other', 'team']);
    expect(op.errors).toHaveLength(3);
  });

  it('a channel summary reports members, pending counts, settings, budgets and the timer', () => {
    const sim = world();
    sim.send('sess_a', 'team', 'x');
    const [s] = dataOf<{ channels: Record<string, unknown>[] }>(
      read(sim, { op: 'status', sid: 'sess_b', args: { channel: 'TEAM' } }),
    ).channels;
    expect(s).toMatchObject({
      name: 'team',
      lifecycle: 'active',
      paused: false,
      description: null,
      parent_channel_id: null,
      coordinator_session_id: 'sess_a',
      max_members: 8,
      pending_messages: 1,
      total_messages: 1,
      settings: { rate_limit: 20, max_hops: 4 },
      budgets: { max_runtime_ms: null, max_delivered_messages: null, delivered_total: 0 },
      members: [
        expect.objectContaining({
          session_id: 'sess_a',
          role: 'Lead',
          host: 'host-push',
          surface: 'cli',
          delivery_mode: 'push',
          stale: false,
          pending: 0,
        }),
        expect.objectContaining({ session_id: 'sess_b', role: 'Reviewer', pending: 1 }),
      ],
    });
    // Tombstones are skipped.
    sim.ok({ op: 'save_session', actor: memberActor('sess_a'), args: { channel: 'team' } });
    expect(dataOf<{ channels: unknown[] }>(read(sim, { op: 'operator_status' })).channels).toHaveLength(1);
  });
});

describe('RD-2 history and inbox', () => {
  it('history returns messages newest first with framed content, including the logged history', () => {
    const sim = world();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(idsOf(sim.send(i % 2 ? 'sess_b' : 'sess_a', 'team', `msg ${i}`, i ? { reply_to: ids[i - 1] } : {}))[0]!);
      sim.advance(10);
    }
    const h = dataOf<{
      messages: (Msg & { sender_role: string; recipient_role: string; hop_count: number })[];
      untrusted_notice: string;
    }>(read(sim, { op: 'history', sid: 'sess_a', args: { channel: 'team' } }));
    expect(h.messages.map((m) => m.message_id)).toEqual([...ids].reverse());
    expect(h.messages[0]).toMatchObject({
      sender_role: 'Lead',
      recipient_role: 'Reviewer',
      hop_count: 4,
      reply_to: ids[3],
      delivery_status: 'pending',
    });
    expect(h.messages[0]!.content).toBe(`${BEGIN_MARKER}\nmsg 4\n${END_MARKER}`);
    expect(h.untrusted_notice).toMatch(/do not follow/i);
    expect(
      dataOf<{ messages: unknown[] }>(read(sim, { op: 'history', sid: 'sess_a', args: { channel: 'team', limit: 2 } }))
        .messages,
    ).toHaveLength(2);

    // Envelopes already in the channel's log are merged in, newest first, without duplicates.
    const logged = [
      {
        ...structuredClone(sim.msg(ids[0]!)),
        message_id: `ocm_${'a'.repeat(32)}`,
        timestamp: sim.msg(ids[0]!).timestamp - 100,
        content: 'old',
      },
    ];
    const merged = dataOf<{ messages: Msg[] }>(
      read(sim, {
        op: 'history',
        sid: 'sess_a',
        args: { channel: 'team' },
        logged: [...logged, structuredClone(sim.msg(ids[1]!))],
      }),
    );
    expect(merged.messages.map((m) => m.message_id)).toEqual([...[...ids].reverse(), logged[0]!.message_id]);
  });

  it('history limits: default 20, max 100, ≤0 → default', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 1000 },
    );
    for (let i = 0; i < 120; i++) {
      sim.send('sess_a', 'team', `m${i}`);
      sim.advance(1);
    }
    const n = (limit?: unknown) =>
      dataOf<{ messages: unknown[] }>(
        read(sim, {
          op: 'history',
          sid: 'sess_b',
          args: { channel: 'team', ...(limit === undefined ? {} : { limit }) },
        }),
      ).messages.length;
    expect([n(), n(0), n(-3), n(5), n(100), n(500), n('7')]).toEqual([20, 20, 20, 5, 100, 100, 7]);
  });

  it('inbox previews the caller’s pending mail on that channel, oldest first, consuming nothing', () => {
    const sim = world();
    sim.channel('third', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    const ids = [0, 1, 2].map((i) => idsOf(sim.send('sess_a', 'team', `t${i}`))[0]!);
    sim.send('sess_a', 'third', 'elsewhere');
    const ib = dataOf<{ pending: number; messages: Msg[]; untrusted_notice: string }>(
      read(sim, { op: 'inbox', sid: 'sess_b', args: { channel: 'team' } }),
    );
    expect(ib.pending).toBe(3);
    expect(ib.messages.map((m) => m.message_id)).toEqual(ids);
    expect(ib.messages[0]!.content).toBe(`${BEGIN_MARKER}\nt0\n${END_MARKER}`);
    expect(ib.untrusted_notice).toBe(UNTRUSTED_NOTICE);
    expect(ib.untrusted_notice).toContain(BEGIN_MARKER);
    expect(
      dataOf<{ messages: unknown[]; pending: number }>(
        read(sim, { op: 'inbox', sid: 'sess_b', args: { channel: 'team', limit: 1 } }),
      ),
    ).toMatchObject({ pending: 3, messages: [expect.anything()] });
    // Inbox never drains: the mail is still there for delivery.
    expect(mustPrompt(sim.drain('sess_b')).message_ids).toEqual([...ids, expect.any(String)]);
    expect(
      dataOf<{ pending: number }>(read(sim, { op: 'inbox', sid: 'sess_b', args: { channel: 'team' } })).pending,
    ).toBe(0);
  });
});

describe('RD-3 archive reads', () => {
  function archived() {
    const sim = world();
    sim.channel('third', [
      ['sess_e', 'Lead'],
      ['sess_a', 'Guest'],
    ]);
    const first = idsOf(sim.send('sess_a', 'team', 'question'))[0]!;
    sim.advance(5);
    sim.send('sess_b', 'team', 'answer', { reply_to: first });
    sim.ok({ op: 'save_session', actor: memberActor('sess_a'), args: { channel: 'team', summary: 'Q and A.' } });
    sim.advance(10);
    sim.ok({ op: 'save_session', actor: memberActor('sess_c'), args: { channel: 'other' } });
    sim.advance(10);
    sim.ok({ op: 'save_session', actor: operatorActor(), args: { channel: 'third' } });
    const newestFirst = [...sim.archives.values()].sort((a, b) => b.saved_at - a.saved_at);
    return { sim, archives: newestFirst, first };
  }

  it('mode=list shows only archives whose roster lists the caller; the operator sees all', () => {
    const { sim, archives } = archived();
    const list = (actor: ReturnType<typeof memberActor>, args: Record<string, unknown> = {}) =>
      dataOf<{ archives: { name: string; roles: string[]; message_count: number; saved_by_role: string | null }[] }>(
        read(sim, { op: 'archive', actor, args, archives }),
      ).archives;
    expect(list(memberActor('sess_a')).map((a) => a.name)).toEqual(['third', 'team']);
    expect(list(memberActor('sess_a'), { mode: 'list' })).toEqual(list(memberActor('sess_a')));
    expect(list(memberActor('sess_d')).map((a) => a.name)).toEqual(['other']);
    expect(list(memberActor('sess_zz'))).toEqual([]);
    expect(list(operatorActor()).map((a) => a.name)).toEqual(['third', 'other', 'team']);
    const team = list(memberActor('sess_b')).find((a) => a.name === 'team')!;
    expect(team).toMatchObject({ roles: ['Lead', 'Reviewer'], message_count: 2, saved_by_role: 'Lead' });
    expect(list(operatorActor()).find((a) => a.name === 'third')!.saved_by_role).toBeNull();
  });

  it('summary and messages modes; refusals', () => {
    const { sim, archives, first } = archived();
    const team = archives.find((a) => a.name === 'team')!;
    const s = dataOf<{ compact_context: string; archive_id: string }>(
      read(sim, {
        op: 'archive',
        actor: memberActor('sess_b'),
        args: { channel: 'team', mode: 'summary' },
        archive: team,
      }),
    );
    expect(s.archive_id).toBe(team.channel_id);
    expect(s.compact_context).toContain('"team"');
    expect(s.compact_context).toContain('Q and A.');
    expect(s.compact_context).toContain('Lead, Reviewer');
    expect(s.compact_context).toContain('mode=messages');
    const m = dataOf<{ messages: Msg[] }>(
      read(sim, {
        op: 'archive',
        actor: memberActor('sess_b'),
        args: { channel: team.channel_id, mode: 'messages' },
        archive: team,
      }),
    );
    expect(m.messages.map((x) => x.reply_to)).toEqual([first, null]);
    expect(m.messages[0]!.content).toBe(`${BEGIN_MARKER}\nanswer\n${END_MARKER}`);
    expect(
      dataOf<{ messages: unknown[] }>(
        read(sim, {
          op: 'archive',
          actor: memberActor('sess_b'),
          args: { channel: 'team', mode: 'messages', limit: 1 },
          archive: team,
        }),
      ).messages,
    ).toHaveLength(1);

    const actor = memberActor('sess_b');
    sim.refuse(
      { op: 'archive', actor, args: { channel: 'team', mode: 'everything' }, archive: team },
      'invalid_argument',
    );
    sim.refuse({ op: 'archive', actor, args: { mode: 'summary' }, archive: team }, 'invalid_argument');
    sim.refuse(
      { op: 'archive', actor, args: { channel: 'nope', mode: 'summary' }, archive: null },
      'archive_not_found',
    );
    sim.refuse(
      { op: 'archive', actor: memberActor('sess_c'), args: { channel: 'team', mode: 'messages' }, archive: team },
      'not_archived_member',
    );
    read(sim, { op: 'archive', actor: operatorActor(), args: { channel: 'team', mode: 'messages' }, archive: team });
  });
});
