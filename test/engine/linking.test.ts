// FEATURES.md §12 Linking (LNK-1..9, 11) and the create/join check order of §3.3.
// LNK-10 (OpenCode child sessions, root lookup) is an adapter pre-check and is not tested here.
import { describe, expect, it } from 'vitest';
import { caller, dataOf, mustPrompt, operatorActor, PROJECT, Sim, WORKTREE } from './fixtures.ts';

const createCmd = (sid: string, args: Record<string, unknown>, extra = {}) =>
  ({
    op: 'create',
    caller: caller(sid, 'push', extra),
    args: { channel: 'team', role: 'Lead', role_prompt: 'Lead the work.', ...args },
  }) as const;
const joinCmd = (sid: string, args: Record<string, unknown>, extra = {}) =>
  ({
    op: 'join',
    caller: caller(sid, 'push', extra),
    args: { channel: 'team', role: 'Reviewer', role_prompt: 'Review.', ...args },
  }) as const;

describe('LNK-1 create registers exactly the caller', () => {
  it('adds one channel whose only member is the caller, as members[0]', () => {
    const sim = new Sim();
    const o = sim.ok(createCmd('sess_a', {}));
    expect(Object.keys(sim.state.channels)).toEqual(['team']);
    const ch = sim.ch('team');
    expect(ch.members).toHaveLength(1);
    expect(ch.members[0]).toMatchObject({
      session_id: 'sess_a',
      role: 'Lead',
      role_prompt: 'Lead the work.',
      stale: false,
      joined_at: sim.now,
    });
    expect(ch.members[0]!.endpoint_capabilities).toMatchObject({ push: true, pull: true });
    expect(ch.members[0]!.stale_policy).toEqual({ mode: 'window', window_ms: 300000 });
    expect(ch).toMatchObject({
      project_id: PROJECT,
      worktree: WORKTREE,
      created_at: sim.now,
      lifecycle: 'active',
      paused: false,
      delivered_total: 0,
    });
    expect(ch.id).toMatch(/^chn_[0-9a-f]{32}$/);
    expect(sim.state.messages).toEqual({});
    expect(sim.state.queues).toEqual({});
    expect(o.effects).toEqual([]);
    expect(dataOf(o)).toEqual({
      channel_id: ch.id,
      role: 'Lead',
      session_id: 'sess_a',
      settings: {
        max_members: 8,
        rate_limit: 20,
        max_hops: 4,
        budgets: {
          max_runtime_ms: null,
          max_delivered_messages: null,
          max_wakes_per_member: 60,
          max_wakes_per_channel: 240,
        },
      },
    });
  });
});

describe('LNK-2 create on a taken name', () => {
  it('an active name → channel_exists', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    const o = sim.refuse(createCmd('sess_b', {}), 'channel_exists');
    expect(o.result.message).toMatch(/join/i);
  });

  it('a saved name → lifecycle_refused with the resume hint', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    sim.ok({
      op: 'save_session',
      actor: { sid: 'sess_a', project_id: PROJECT, worktree: WORKTREE },
      args: { channel: 'team' },
    });
    const o = sim.refuse(createCmd('sess_b', {}), 'lifecycle_refused');
    expect(dataOf(o)).toMatchObject({ lifecycle: 'saved' });
    expect(String(dataOf(o).hint)).toMatch(/resume/);
  });

  it('a deleted tombstone name is reused silently (new id)', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    const old = sim.ch('team').id;
    sim.ok({ op: 'delete_session', actor: operatorActor(), args: { channel: 'team', confirm: true }, archive: null });
    expect(sim.ch('team').lifecycle).toBe('deleted');
    sim.ok(createCmd('sess_b', {}));
    expect(sim.ch('team').lifecycle).toBe('active');
    expect(sim.ch('team').id).not.toBe(old);
    expect(sim.ch('team').members.map((m) => m.session_id)).toEqual(['sess_b']);
  });
});

describe('LNK-3 joining a missing channel', () => {
  it('answers channel_not_found telling the agent to stop and report; nothing is written', () => {
    const sim = new Sim();
    sim.create('sess_a', 'other', 'Lead');
    const o = sim.refuse(joinCmd('sess_b', { channel: 'nope' }), 'channel_not_found');
    expect(o.result.message).toMatch(/do not create/i);
    expect(o.result.message).toMatch(/report/i);
  });
});

describe('LNK-4 slug rules and max_members', () => {
  it('trims and lowercases names; 64 chars pass, 65 and off-pattern names do not', () => {
    const sim = new Sim();
    sim.ok(createCmd('sess_a', { channel: '  My-Team_1 ' }));
    expect(sim.state.channels['my-team_1']?.name).toBe('my-team_1');
    const n64 = 'a'.repeat(64);
    sim.ok(createCmd('sess_b', { channel: n64 }));
    expect(sim.state.channels[n64]).toBeDefined();
    for (const bad of ['a'.repeat(65), '-lead', '_lead', 'has space', 'dot.ted', 'ümlaut', '', '   ', 42, null])
      sim.refuse(createCmd('sess_c', { channel: bad }), 'invalid_channel_name');
    // Joins normalise the same way.
    sim.ok(joinCmd('sess_c', { channel: ' MY-TEAM_1' }));
  });

  it('max_members is floored and clamped to 2..32; non-numbers are invalid_argument', () => {
    const cases: [unknown, number][] = [
      [undefined, 8],
      [1, 2],
      [0, 2],
      [-5, 2],
      [9.9, 9],
      [100, 32],
      [32, 32],
      ['12', 12],
    ];
    for (const [raw, want] of cases) {
      const sim = new Sim();
      const o = sim.ok(createCmd('sess_a', raw === undefined ? {} : { max_members: raw }));
      expect(sim.ch('team').max_members, `max_members ${String(raw)}`).toBe(want);
      expect((dataOf(o).settings as { max_members: number }).max_members).toBe(want);
    }
    const sim = new Sim();
    const o = sim.refuse(createCmd('sess_a', { max_members: 'lots' }), 'invalid_argument');
    expect(dataOf(o).field).toBe('max_members');
    sim.refuse(createCmd('sess_a', { rate_limit: NaN }), 'invalid_argument');
  });

  it('other options clamp to their ranges', () => {
    const sim = new Sim();
    const o = sim.ok(createCmd('sess_a', { rate_limit: 5000, max_hops: 0, budget_runtime_ms: 5, budget_messages: 0 }));
    expect(dataOf(o).settings).toEqual({
      max_members: 8,
      rate_limit: 1000,
      max_hops: 1,
      budgets: {
        max_runtime_ms: 60000,
        max_delivered_messages: 1,
        max_wakes_per_member: 60,
        max_wakes_per_channel: 240,
      },
    });
    const ch = sim.ch('team');
    expect([ch.rate_limit, ch.max_hops, ch.budgets.max_runtime_ms, ch.budgets.max_delivered_messages]).toEqual([
      1000, 1, 60000, 1,
    ]);
    const sim2 = new Sim();
    sim2.ok(createCmd('sess_a', { budget_runtime_ms: 1e12, budget_messages: 1e9 }));
    expect(sim2.ch('team').budgets).toEqual({
      max_runtime_ms: 2592000000,
      max_delivered_messages: 1000000,
      max_wakes_per_member: 60,
      max_wakes_per_channel: 240,
    });
  });

  it('9+ members join when max_members ≥ 9; the default 8 is a default, not a ceiling', () => {
    const sim = new Sim();
    sim.ok(createCmd('sess_0', { max_members: 12 }));
    for (let i = 1; i < 12; i++) sim.join(`sess_${i}`, 'team', `Role ${i}`);
    expect(sim.ch('team').members).toHaveLength(12);
    sim.refuse(joinCmd('sess_12', { role: 'Role 12' }), 'channel_full');

    const def = new Sim();
    def.ok(createCmd('sess_0', {}));
    for (let i = 1; i < 8; i++) def.join(`sess_${i}`, 'team', `Role ${i}`);
    def.refuse(joinCmd('sess_8', { role: 'Role 8' }), 'channel_full');
  });
});

describe('LNK-5 joining', () => {
  it('a second session joins under its own role', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    const o = sim.ok(joinCmd('sess_b', {}));
    expect(dataOf(o)).toMatchObject({
      channel_id: sim.ch('team').id,
      role: 'Reviewer',
      session_id: 'sess_b',
      parent_channel_id: null,
    });
    expect(sim.ch('team').members.map((m) => [m.session_id, m.role])).toEqual([
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer'],
    ]);
  });

  it('the same session cannot join twice, under the same or another role (already_member)', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    sim.join('sess_b', 'team', 'Reviewer');
    sim.refuse(joinCmd('sess_b', {}), 'already_member');
    const o = sim.refuse(joinCmd('sess_b', { role: 'Tester' }), 'already_member');
    expect(dataOf(o).role).toBe('Reviewer');
    sim.refuse(joinCmd('sess_a', { role: 'Tester' }), 'already_member');
  });

  it('a spawn_push member without host_session_id is warned', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    const o = sim.ok({
      op: 'join',
      caller: caller('sess_b', 'spawn_push'),
      args: { channel: 'team', role: 'Worker', role_prompt: 'Work.' },
    });
    expect(dataOf(o).warnings).toEqual(['spawn_push_unbound']);
  });
});

describe('LNK-6 role uniqueness', () => {
  it('a held role cannot be taken in any case or whitespace variant; spelling is preserved', () => {
    const sim = new Sim();
    sim.ok(createCmd('sess_a', { role: '  Code   Reviewer ' }));
    expect(sim.ch('team').members[0]!.role).toBe('Code Reviewer');
    for (const variant of ['Code Reviewer', 'code reviewer', 'CODE REVIEWER', ' code\treviewer ', 'Code  Reviewer'])
      sim.refuse(joinCmd('sess_b', { role: variant }), 'role_taken');
    sim.join('sess_b', 'team', 'Code-Reviewer');
  });
});

describe('LNK-7 cap before role uniqueness', () => {
  it('a full channel answers channel_full even when the role is also taken', () => {
    const sim = new Sim();
    sim.ok(createCmd('sess_a', { max_members: 2 }));
    sim.join('sess_b', 'team', 'Reviewer');
    sim.refuse(joinCmd('sess_c', { role: 'reviewer' }), 'channel_full');
    sim.refuse(joinCmd('sess_c', { role: 'Tester' }), 'channel_full');
  });
});

describe('LNK-8 role before channel', () => {
  it('an invalid role answers invalid_role even for a missing channel or a bad name', () => {
    const sim = new Sim();
    for (const role of ['', '   ', '1st', 'a'.repeat(33), 'bad!role', 42])
      sim.refuse(joinCmd('sess_b', { role, channel: 'missing' }), 'invalid_role');
    sim.refuse(joinCmd('sess_b', { role: '9', channel: 'Bad Name!' }), 'invalid_role');
    // A 32-char role is fine.
    sim.create('sess_a', 'team', 'Lead');
    sim.ok(joinCmd('sess_b', { role: `R${'x'.repeat(31)}` }));
  });
});

describe('LNK-9 open-vocabulary roles', () => {
  it('"Data Wrangler" works end to end: join, be addressed by role, receive a framed message', () => {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Data Wrangler'],
      ['sess_c', 'QA'],
    ]);
    const sent = sim.send('sess_a', 'team', 'Please clean the CSV.', { to: 'data wrangler' });
    expect(dataOf(sent).recipients).toEqual([
      { session_id: 'sess_b', role: 'Data Wrangler', delivery_mode: 'push', deliverability: 'ready' },
    ]);
    const p = mustPrompt(sim.drain('sess_b'));
    sim.commit(p);
    expect(sim.msg(p.message_ids[0]!).delivery_status).toBe('delivered');
    const back = sim.send('sess_b', 'team', 'Cleaned.', { to: 'Lead', reply_to: p.message_ids[0] });
    expect(dataOf(back).hop_count).toBe(1);
    const p2 = mustPrompt(sim.drain('sess_a'));
    expect(p2.text).toContain('[OpenComms] from Data Wrangler | type: manual');
  });
});

describe('LNK-11 project and worktree', () => {
  it('a different project or worktree is refused', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    const p = sim.refuse(joinCmd('sess_b', {}, { project_id: 'proj-other' }), 'project_mismatch');
    expect(p.result.message).toMatch(/never relink/i);
    sim.refuse(joinCmd('sess_b', {}, { worktree: '/work/projects/beta' }), 'worktree_mismatch');
  });

  it('sentinel project ids never mismatch, on either side', () => {
    for (const sentinel of ['local-project', 'gui-local-project', 'cli-local-project', 'global']) {
      const sim = new Sim();
      sim.create('sess_a', 'team', 'Lead');
      sim.ok(joinCmd('sess_b', {}, { project_id: sentinel }));
      const sim2 = new Sim();
      sim2.ok(createCmd('sess_a', {}, { project_id: sentinel }));
      sim2.ok(joinCmd('sess_b', {}, { project_id: 'proj-real' }));
    }
  });

  it('worktrees compare as plain strings: any other string is worktree_mismatch, the same string joins', () => {
    // The engine does no path arithmetic: the shell hands it one normalised spelling per directory
    // (normaliseWorktree, test/runtime/worktree.test.ts; end to end in test/adapters/mcp/tools.test.ts).
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    for (const other of [
      '/work/projects/beta',
      `${WORKTREE}/`,
      '/work/projects/x/../alpha',
      WORKTREE.toUpperCase(),
      'work/projects/alpha',
    ]) {
      const o = sim.refuse(joinCmd('sess_b', {}, { worktree: other }), 'worktree_mismatch');
      expect(o.result.message).toContain(WORKTREE);
    }
    sim.ok(joinCmd('sess_b', {}, { worktree: WORKTREE }));
    expect(sim.ch('team')).toMatchObject({
      worktree: WORKTREE,
      members: [{ session_id: 'sess_a' }, { session_id: 'sess_b' }],
    });
  });

  it('an empty (resumed) channel adopts the first joiner’s worktree and real project id', () => {
    const sim = new Sim();
    sim.create('sess_a', 'team', 'Lead');
    sim.ok({ op: 'save_session', actor: operatorActor(), args: { channel: 'team' } });
    const archive = [...sim.archives.values()][0]!;
    sim.ok({
      op: 'resume_session',
      actor: { operator: true, project_id: 'cli-local-project', worktree: '/somewhere' },
      args: { channel: 'team' },
      archive,
    });
    expect(sim.ch('team')).toMatchObject({ project_id: 'cli-local-project', worktree: '/somewhere', members: [] });
    sim.ok(joinCmd('sess_a', { role: 'Lead' }, { worktree: '/work/projects/alpha' }));
    expect(sim.ch('team')).toMatchObject({ project_id: PROJECT, worktree: '/work/projects/alpha' });
    sim.refuse(joinCmd('sess_b', {}, { worktree: '/somewhere' }), 'worktree_mismatch');
  });
});

describe('check order (§3.3)', () => {
  it('create: name → context → role prompt → role → options → existence', () => {
    const sim = new Sim();
    sim.create('sess_x', 'team', 'Lead');
    sim.refuse(createCmd('', { channel: 'BAD NAME', role: '1', role_prompt: '' }), 'invalid_channel_name');
    sim.refuse(createCmd('', { role: '1', role_prompt: '' }), 'context_missing');
    sim.refuse(createCmd('sess_a', { role: '1', role_prompt: '' }, { project_id: '' }), 'context_missing');
    sim.refuse(
      createCmd('sess_a', { role: '1', role_prompt: '', max_members: 'x' }, { worktree: '' }),
      'context_missing',
    );
    sim.refuse(createCmd('sess_a', { role: '1', role_prompt: '  ', max_members: 'x' }), 'role_prompt_required');
    sim.refuse(createCmd('sess_a', { role: '1', max_members: 'x' }), 'invalid_role');
    sim.refuse(createCmd('sess_a', { max_members: 'x' }), 'invalid_argument');
    sim.refuse(createCmd('sess_a', {}), 'channel_exists');
  });

  it('join: role → existence (any spelling) → lifecycle → project → worktree → membership → cap → role → prompt', () => {
    const sim = new Sim();
    sim.ok(createCmd('sess_a', { max_members: 2 }));
    sim.join('sess_b', 'team', 'Reviewer');
    sim.create('sess_s', 'saved-one', 'Lead');
    sim.ok({ op: 'save_session', actor: operatorActor(), args: { channel: 'saved-one' } });
    const all = { role_prompt: ' ' };
    sim.refuse(joinCmd('sess_c', { ...all, role: '!', channel: 'BAD NAME' }), 'invalid_role');
    // A name no channel holds is channel_not_found however it is spelled: only create judges a new
    // name's shape, and a joiner must STOP rather than create (issue 8, item 3).
    sim.refuse(joinCmd('sess_c', { ...all, channel: 'BAD NAME' }), 'channel_not_found');
    sim.refuse(joinCmd('sess_c', { ...all, channel: 'missing' }), 'channel_not_found');
    sim.refuse(
      joinCmd('sess_c', { ...all, channel: 'saved-one' }, { project_id: 'x', worktree: '/x' }),
      'lifecycle_refused',
    );
    sim.refuse(joinCmd('sess_a', { ...all }, { project_id: 'other', worktree: '/x' }), 'project_mismatch');
    sim.refuse(joinCmd('sess_a', { ...all }, { worktree: '/x' }), 'worktree_mismatch');
    sim.refuse(joinCmd('sess_a', { ...all, role: 'Reviewer' }), 'already_member');
    sim.refuse(joinCmd('sess_c', { ...all, role: 'Reviewer' }), 'channel_full');
    const open = new Sim();
    open.create('sess_a', 'team', 'Lead');
    open.refuse(joinCmd('sess_c', { ...all, role: 'lead' }), 'role_taken');
    open.refuse(joinCmd('sess_c', { ...all, role: 'Tester' }), 'role_prompt_required');
  });
});
