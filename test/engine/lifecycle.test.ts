// FEATURES.md §12 Session lifecycle (LCY-1..7), §2.3 tombstones, §2.6 archives, §5.10, §5.11.
// A save returns its archive in `writes.archive`; the tests feed that archive back into restore,
// delete and archive commands as the shell would after reading the file.
import { describe, expect, it } from 'vitest';
import { compactContext } from '../../src/engine/index.ts';
import type { Archive } from '../../src/protocol/archive.ts';
import { caller, dataOf, idsOf, memberActor, mustPrompt, operatorActor, PROJECT, Sim, WORKTREE } from './fixtures.ts';

function busy() {
  const sim = new Sim();
  sim.channel('team', [
    ['sess_a', 'Lead'],
    ['sess_b', 'Reviewer'],
    ['sess_c', 'Tester', 'pull'],
  ]);
  return sim;
}

const saveCmd = (sid: string, args: Record<string, unknown> = {}) =>
  ({ op: 'save_session', actor: memberActor(sid), args: { channel: 'team', ...args } }) as const;
const onlyArchive = (sim: Sim): Archive => {
  const all = [...sim.archives.values()];
  expect(all).toHaveLength(1);
  return all[0]!;
};

describe('LCY-1 new channels', () => {
  it('are active, with no description and no parent', () => {
    const sim = busy();
    expect(sim.ch('team')).toMatchObject({
      lifecycle: 'active',
      lifecycle_at: null,
      description: null,
      parent_channel_id: null,
      paused: false,
      paused_at: null,
    });
  });
});

describe('LCY-2 save', () => {
  it('archives messages (pending and in-flight included), metadata, the roster with prompts, and the summary', () => {
    const sim = busy();
    sim.ok({ op: 'update_role', sid: 'sess_b', args: { channel: 'team', role_prompt: '  Review every diff.  ' } });
    sim.send('sess_a', 'team', 'session about X', { to: 'sess_b', session_description: 'Work on X' });
    sim.advance(10);
    const inFlight = idsOf(sim.send('sess_a', 'team', 'second', { to: 'sess_b' }));
    sim.drain('sess_b');
    sim.advance(10);
    const last = 'z'.repeat(500);
    sim.send('sess_b', 'team', last, { to: 'sess_c' });
    const logged = [
      {
        ...structuredClone(sim.msg(inFlight[0]!)),
        message_id: `ocm_${'b'.repeat(32)}`,
        timestamp: sim.now - 1_000_000,
        delivery_status: 'delivered' as const,
      },
    ];
    sim.advance(10);
    const team = sim.ch('team');
    const id = team.id;
    const o = sim.ok({ ...saveCmd('sess_b'), logged });
    expect(dataOf(o)).toMatchObject({ archive_id: id, message_count: 4 });
    expect(String(dataOf(o).summary)).toMatch(/4 message/);
    const a = onlyArchive(sim);
    expect(a).toMatchObject({
      schema: 1,
      channel_id: id,
      name: 'team',
      parent_channel_id: null,
      description: 'Work on X',
      budgets: { max_runtime_ms: null, max_delivered_messages: null },
      created_at: team.created_at,
      saved_at: sim.now,
      saved_by: 'sess_b',
      saved_by_role: 'Reviewer',
      message_count: 4,
      final_state_note: 'z'.repeat(400),
    });
    expect(a.members.map((m) => [m.session_id, m.role, m.role_prompt])).toEqual([
      ['sess_a', 'Lead', 'Act as Lead.'],
      ['sess_b', 'Reviewer', 'Review every diff.'],
      ['sess_c', 'Tester', 'Act as Tester.'],
    ]);
    // Oldest first, logged history merged, pending and in-flight archived as they are.
    expect(a.messages.map((e) => [e.content, e.delivery_status])).toEqual([
      ['second', 'delivered'],
      ['session about X', 'in_flight'],
      ['second', 'in_flight'],
      [last, 'pending'],
    ]);
    expect(a.messages[0]!.message_id).toBe(logged[0]!.message_id);
    expect(a.messages[2]!.message_id).toBe(inFlight[0]);
    // The live channel became a tombstone; nothing of it stays in live state.
    expect(sim.ch('team')).toMatchObject({ id, name: 'team', lifecycle: 'saved', lifecycle_at: sim.now, members: [] });
    expect(Object.values(sim.state.messages).filter((e) => e.channel_id === id)).toEqual([]);
    expect(sim.state.queues).toEqual({});
    expect(sim.state.delivered_to).toEqual({});
    // Nothing is delivered after a save.
    expect(sim.drain('sess_b').effects).toEqual([]);
  });

  it('generates a summary when none is given; operator saves have no saved_by; 2001 chars are refused', () => {
    const sim = busy();
    sim.send('sess_a', 'team', 'only message', { to: 'sess_b' });
    sim.refuse(saveCmd('sess_a', { summary: 'x'.repeat(2001) }), 'summary_too_large');
    sim.refuse(saveCmd('sess_z'), 'not_member');
    sim.ok({ op: 'save_session', actor: operatorActor(), args: { channel: 'team', summary: 'y'.repeat(2000) } });
    const a = onlyArchive(sim);
    expect(a).toMatchObject({ saved_by: null, saved_by_role: null, summary: 'y'.repeat(2000) });

    const quiet = new Sim();
    quiet.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    quiet.ok(saveCmd('sess_a'));
    expect(onlyArchive(quiet).summary).toMatch(/Lead, Reviewer/);
    expect(onlyArchive(quiet).final_state_note).toBe('');
  });

  it('a paused channel saves too (and is no longer paused)', () => {
    const sim = busy();
    sim.ok({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    sim.ok(saveCmd('sess_a'));
    expect(sim.ch('team')).toMatchObject({ lifecycle: 'saved', paused: false });
  });
});

describe('LCY-3 after a save', () => {
  it('send, join, create and every channel-scoped call answer lifecycle_refused with the restore hint', () => {
    const sim = busy();
    sim.ok(saveCmd('sess_a'));
    const check = (cmd: Parameters<Sim['refuse']>[0]) => {
      const o = sim.refuse(cmd, 'lifecycle_refused');
      expect(dataOf(o).lifecycle).toBe('saved');
      expect(String(dataOf(o).hint)).toContain('opencomms_resume_session');
      expect(o.result.message).toMatch(/restore/i);
    };
    check({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'x' } });
    check({ op: 'join', caller: caller('sess_x'), args: { channel: 'team', role: 'New', role_prompt: 'p' } });
    check({ op: 'create', caller: caller('sess_x'), args: { channel: 'team', role: 'New', role_prompt: 'p' } });
    check({ op: 'inbox', sid: 'sess_a', args: { channel: 'team' } });
    check({ op: 'history', sid: 'sess_a', args: { channel: 'team' } });
    check({ op: 'pull', sid: 'sess_c', args: { channel: 'team' } });
    check({ op: 'pause', sid: 'sess_a', args: { channel: 'team' } });
    check({ op: 'resume', sid: 'sess_a', args: { channel: 'team' } });
    check({ op: 'disconnect', sid: 'sess_a', args: { channel: 'team' } });
    check({ op: 'update_role', sid: 'sess_a', args: { channel: 'team', role_prompt: 'x' } });
    check({ op: 'kick', caller: 'sess_a', args: { channel: 'team', target_role: 'Tester' } });
    check({ op: 'timer', sid: 'sess_a', args: { channel: 'team', action: 'start' } });
    check({ op: 'save_session', actor: memberActor('sess_a'), args: { channel: 'team' } });
    check({ op: 'save_session', actor: operatorActor(), args: { channel: 'team' } });
  });

  it('a deleted tombstone answers lifecycle_refused with the “gone” hint', () => {
    const sim = busy();
    sim.ok({
      op: 'delete_session',
      actor: memberActor('sess_a'),
      args: { channel: 'team', confirm: true },
      archive: null,
    });
    const o = sim.refuse({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'x' } }, 'lifecycle_refused');
    expect(dataOf(o).lifecycle).toBe('deleted');
    expect(String(dataOf(o).hint)).toMatch(/gone/);
  });
});

describe('LCY-4 restore', () => {
  it('creates a new, empty, linked session; its joiners get only compact_context', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { budget_runtime_ms: 120_000, budget_messages: 50 },
    );
    sim.send('sess_a', 'team', 'context', { session_description: 'Old work' });
    sim.ok(saveCmd('sess_a'));
    const a = onlyArchive(sim);
    sim.advance(1_000_000);
    const o = sim.ok({ op: 'resume_session', actor: memberActor('sess_b'), args: { channel: 'team' }, archive: a });
    expect(dataOf(o)).toEqual({
      channel_id: expect.stringMatching(/^chn_/),
      name: 'team',
      parent_channel_id: a.channel_id,
      members: [],
      archive_name: 'team',
    });
    const ch = sim.ch('team');
    expect(ch.id).not.toBe(a.channel_id);
    expect(ch).toMatchObject({
      lifecycle: 'active',
      parent_channel_id: a.channel_id,
      description: 'Old work',
      budgets: { max_runtime_ms: 120_000, max_delivered_messages: 50 },
      created_at: sim.now,
      delivered_total: 0,
      members: [],
      project_id: PROJECT,
      worktree: WORKTREE,
      rate_limit: 20,
      max_hops: 4,
      max_members: 8,
    });
    // No envelope of the old channel came back.
    expect(sim.state.messages).toEqual({});
    const cc = compactContext(a);
    const j = sim.ok({
      op: 'join',
      caller: caller('sess_a'),
      args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.' },
      compact_context: cc,
    });
    expect(dataOf(j)).toMatchObject({ parent_channel_id: a.channel_id, compact_context: cc });
    expect(cc).toContain('Summary:');
    expect(cc).toContain('Messages archived: 1');
    // The runtime budget counts from the new created_at.
    sim.join('sess_b', 'team', 'Reviewer');
    sim.send('sess_a', 'team', 'fresh');
  });

  it('refusals: no archive, not in the roster, explicit names', () => {
    const sim = busy();
    sim.ok(saveCmd('sess_a'));
    const a = onlyArchive(sim);
    sim.create('sess_x', 'taken', 'Lead');
    sim.refuse(
      { op: 'resume_session', actor: memberActor('sess_a'), args: { channel: 'nope' }, archive: null },
      'archive_not_found',
    );
    const nm = sim.refuse(
      { op: 'resume_session', actor: memberActor('sess_x'), args: { channel: 'team' }, archive: a },
      'not_archived_member',
    );
    expect(nm.result.message).toMatch(/operator/);
    sim.refuse(
      { op: 'resume_session', actor: memberActor('sess_a'), args: { channel: 'team', new_name: 'taken' }, archive: a },
      'channel_exists',
    );
    sim.refuse(
      {
        op: 'resume_session',
        actor: memberActor('sess_a'),
        args: { channel: 'team', new_name: 'Bad Name' },
        archive: a,
      },
      'invalid_channel_name',
    );
    sim.ok({
      op: 'resume_session',
      actor: memberActor('sess_a'),
      args: { channel: 'team', new_name: ' Fresh-Start ' },
      archive: a,
    });
    expect(sim.ch('fresh-start').parent_channel_id).toBe(a.channel_id);
    // The tombstone is untouched by a restore under another name.
    expect(sim.ch('team').lifecycle).toBe('saved');
    // The operator may restore any archive; a name held by a tombstone counts as free.
    sim.ok({ op: 'resume_session', actor: operatorActor(), args: { channel: 'team' }, archive: a });
    expect(sim.ch('team')).toMatchObject({ lifecycle: 'active', project_id: 'cli-local-project' });
  });
});

describe('LCY-5 restore ladder', () => {
  it('gives base, -r2 … -r9, then resume_ladder_exhausted', () => {
    const sim = busy();
    sim.ok(saveCmd('sess_a'));
    const a = onlyArchive(sim);
    const names: string[] = [];
    for (let i = 0; i < 9; i++)
      names.push(
        String(
          dataOf(sim.ok({ op: 'resume_session', actor: memberActor('sess_b'), args: { channel: 'team' }, archive: a }))
            .name,
        ),
      );
    expect(names).toEqual([
      'team',
      'team-r2',
      'team-r3',
      'team-r4',
      'team-r5',
      'team-r6',
      'team-r7',
      'team-r8',
      'team-r9',
    ]);
    const o = sim.refuse(
      { op: 'resume_session', actor: memberActor('sess_b'), args: { channel: 'team' }, archive: a },
      'resume_ladder_exhausted',
    );
    expect(o.result.message).toMatch(/new_name/);
    // A deleted rung is free again.
    sim.ok({
      op: 'delete_session',
      actor: operatorActor(),
      args: { channel: 'team-r5', confirm: true },
      archive: null,
    });
    expect(
      dataOf(sim.ok({ op: 'resume_session', actor: memberActor('sess_b'), args: { channel: 'team' }, archive: a }))
        .name,
    ).toBe('team-r5');
  });

  it('cuts a long base so a suffixed name stays ≤64', () => {
    const long = 'l'.repeat(64);
    const sim = new Sim();
    sim.channel(long, [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    sim.ok({ op: 'save_session', actor: memberActor('sess_a'), args: { channel: long } });
    const a = onlyArchive(sim);
    sim.ok({ op: 'resume_session', actor: memberActor('sess_a'), args: { channel: long }, archive: a });
    const o = sim.ok({ op: 'resume_session', actor: memberActor('sess_a'), args: { channel: long }, archive: a });
    expect(dataOf(o).name).toBe(`${'l'.repeat(61)}-r2`);
  });
});

describe('LCY-6 delete', () => {
  it('without confirm → confirm_required; an active delete needs membership and discards the mail', () => {
    const sim = busy();
    const sent = idsOf(sim.send('sess_a', 'team', 'x', { to: 'sess_b' }));
    for (const confirm of [undefined, false, 'true', 1])
      sim.refuse(
        { op: 'delete_session', actor: memberActor('sess_a'), args: { channel: 'team', confirm }, archive: null },
        'confirm_required',
      );
    sim.refuse(
      { op: 'delete_session', actor: memberActor('sess_z'), args: { channel: 'team', confirm: true }, archive: null },
      'not_member',
    );
    sim.refuse(
      { op: 'delete_session', actor: memberActor('sess_a'), args: { channel: 'ghost', confirm: true }, archive: null },
      'channel_not_found',
    );
    // A name longer than any channel's is answered as such, as every lookup answers it, never as
    // the channel its first 64 characters would name.
    const long = sim.refuse(
      {
        op: 'delete_session',
        actor: memberActor('sess_a'),
        args: { channel: `team${'x'.repeat(66)}`, confirm: true },
        archive: null,
      },
      'channel_not_found',
    );
    expect(long.result.message).toContain('it has 70 characters, and a channel name has at most 64');
    expect(long.result.message).not.toContain('xxxxxxxxxx');
    const unconfirmed = sim.refuse(
      { op: 'delete_session', actor: memberActor('sess_a'), args: { channel: 'team' }, archive: null },
      'confirm_required',
    );
    expect(unconfirmed.result.message).not.toMatch(/also removes the archive/);
    const id = sim.ch('team').id;
    const o = sim.ok({
      op: 'delete_session',
      actor: memberActor('sess_c'),
      args: { channel: 'team', confirm: true },
      archive: null,
    });
    expect(dataOf(o)).toEqual({ name: 'team', deleted: 'live' });
    expect(sim.ch('team')).toMatchObject({ id, lifecycle: 'deleted', members: [] });
    expect(sim.state.messages[sent[0]!]).toBeUndefined();
    expect(sim.state.queues).toEqual({});
    // The channel's logged history goes too: a deleted session carries no context.
    expect(o.writes?.deleteHistory).toEqual([id]);
    sim.refuse(
      { op: 'delete_session', actor: memberActor('sess_c'), args: { channel: 'team', confirm: true }, archive: null },
      'lifecycle_refused',
    );
  });

  it('a saved channel: the archive file is removed and the tombstone becomes deleted', () => {
    const sim = busy();
    sim.ok(saveCmd('sess_a'));
    const a = onlyArchive(sim);
    sim.refuse(
      { op: 'delete_session', actor: memberActor('sess_a'), args: { channel: 'team', confirm: true }, archive: null },
      'archive_not_found',
    );
    sim.refuse(
      { op: 'delete_session', actor: memberActor('sess_z'), args: { channel: 'team', confirm: true }, archive: a },
      'not_archived_member',
    );
    const o = sim.ok({
      op: 'delete_session',
      actor: memberActor('sess_b'),
      args: { channel: 'team', confirm: true },
      archive: a,
    });
    expect(dataOf(o)).toEqual({ name: 'team', deleted: 'archive' });
    expect(o.writes).toMatchObject({ deleteArchive: a.channel_id, deleteHistory: [a.channel_id] });
    expect(sim.archives.size).toBe(0);
    expect(sim.ch('team').lifecycle).toBe('deleted');
    sim.refuse(
      { op: 'delete_session', actor: operatorActor(), args: { channel: 'team', confirm: true }, archive: a },
      'lifecycle_refused',
    );
    // create may reuse the name now.
    sim.create('sess_q', 'team', 'Lead');
  });

  it('the operator may delete either kind; by archive id too', () => {
    const sim = busy();
    sim.ok(saveCmd('sess_a'));
    const a = onlyArchive(sim);
    sim.ok({
      op: 'delete_session',
      actor: operatorActor(),
      args: { channel: a.channel_id, confirm: true },
      archive: a,
    });
    expect(sim.ch('team').lifecycle).toBe('deleted');
    const live = new Sim();
    live.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    live.ok({ op: 'delete_session', actor: operatorActor(), args: { channel: 'team', confirm: true }, archive: null });
    expect(live.ch('team').lifecycle).toBe('deleted');
  });
});

describe('LCY-7 session_description', () => {
  it('is set once (collapsed, cut to 140); a bad description never breaks a send', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    for (const bad of [42, '   ', { x: 1 }, null]) {
      const o = sim.send('sess_a', 'team', `with ${JSON.stringify(bad)}`, { session_description: bad });
      expect(dataOf(o).session_description).toBeUndefined();
    }
    expect(sim.ch('team').description).toBeNull();
    const first = sim.send('sess_a', 'team', 'real', {
      session_description: `  Port   the\nparser ${'p'.repeat(200)}`,
    });
    const want = `Port the parser ${'p'.repeat(200)}`.slice(0, 140);
    expect(dataOf(first).session_description).toBe(want);
    expect(sim.ch('team').description).toBe(want);
    const second = sim.send('sess_b', 'team', 'later', { session_description: 'Something else' });
    expect(dataOf(second).session_description).toBeUndefined();
    expect(sim.ch('team').description).toBe(want);
    // A refused send records nothing.
    const fresh = new Sim();
    fresh.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
    fresh.refuse(
      { op: 'send', sid: 'sess_a', args: { channel: 'team', content: ' ', session_description: 'x' } },
      'content_empty',
    );
    expect(fresh.ch('team').description).toBeNull();
    expect(mustPrompt(sim.drain('sess_b')).message_ids.length).toBeGreaterThan(0);
  });
});
