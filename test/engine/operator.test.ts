// Operator create of an empty channel (FEATURES.md §9 `channel create`, §10.2 POST /api/channels,
// CON-1, CON-6): empty, active, sentinel project id; refusals with their reason codes.
import { describe, expect, it } from 'vitest';
import type { OperatorCaller } from '../../src/engine/index.ts';
import { caller, dataOf, PROJECT, Sim, WORKTREE } from './fixtures.ts';

const gui: OperatorCaller = { operator: true, project_id: 'gui-local-project', worktree: WORKTREE };
const createCmd = (args: { channel: unknown; max_members?: unknown }, actor: OperatorCaller = gui) =>
  ({ op: 'create_session', actor, args }) as const;

describe('CON-1 operator create', () => {
  it('makes an empty active session with the operator sentinel project and the project worktree', () => {
    const sim = new Sim();
    const o = sim.ok(createCmd({ channel: '  Review-2 ', max_members: '5' }));
    const ch = sim.ch('review-2');
    expect(dataOf(o)).toEqual({ channel_id: ch.id, name: 'review-2', max_members: 5 });
    expect(ch).toMatchObject({
      members: [],
      lifecycle: 'active',
      paused: false,
      project_id: 'gui-local-project',
      worktree: WORKTREE,
      parent_channel_id: null,
      description: null,
      delivered_total: 0,
      created_at: sim.now,
    });
  });

  it('defaults and clamps max_members like create (8; 2..32)', () => {
    const sim = new Sim();
    sim.ok(createCmd({ channel: 'a' }));
    sim.ok(createCmd({ channel: 'b', max_members: 1 }));
    sim.ok(createCmd({ channel: 'c', max_members: 99.7 }));
    sim.ok(createCmd({ channel: 'd', max_members: null }));
    expect(['a', 'b', 'c', 'd'].map((n) => sim.ch(n).max_members)).toEqual([8, 2, 32, 8]);
  });

  it('refuses a bad name, a non-numeric size, a live name and a saved name; reuses a deleted one', () => {
    const sim = new Sim();
    sim.refuse(createCmd({ channel: 'Bad Name!' }), 'invalid_channel_name');
    sim.refuse(createCmd({ channel: '' }), 'invalid_channel_name');
    sim.refuse(createCmd({ channel: 'x', max_members: 'many' }), 'invalid_argument');
    sim.ok(createCmd({ channel: 'team' }));
    sim.refuse(createCmd({ channel: 'TEAM' }), 'channel_exists');

    sim.ok({ op: 'save_session', actor: gui, args: { channel: 'team' } });
    const saved = sim.refuse(createCmd({ channel: 'team' }), 'lifecycle_refused');
    expect(saved.result.data).toMatchObject({ lifecycle: 'saved' });

    sim.ok(createCmd({ channel: 'gone' }));
    const oldId = sim.ch('gone').id;
    sim.ok({ op: 'delete_session', actor: gui, args: { channel: 'gone', confirm: true }, archive: null });
    expect(sim.ch('gone').lifecycle).toBe('deleted');
    sim.ok(createCmd({ channel: 'gone' }));
    expect(sim.ch('gone')).toMatchObject({ lifecycle: 'active' });
    expect(sim.ch('gone').id).not.toBe(oldId);
  });
});

describe('CON-6 a console-created session adopts its first joiner', () => {
  it('a sentinel MCP caller joins the empty channel; later comparisons are strict', () => {
    const sim = new Sim();
    sim.ok(createCmd({ channel: 'team' }, { operator: true, project_id: 'gui-local-project', worktree: '/elsewhere' }));
    // The first joiner (MCP sentinel project id) adopts the worktree; the sentinel project stays.
    sim.ok({
      op: 'join',
      caller: caller('sess_a', 'pull', { project_id: 'local-project' }),
      args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.' },
    });
    expect(sim.ch('team')).toMatchObject({ worktree: WORKTREE, project_id: 'gui-local-project' });
    // A later joiner from another worktree is refused: strict from now on.
    sim.refuse(
      {
        op: 'join',
        caller: caller('sess_b', 'pull', { worktree: '/other' }),
        args: { channel: 'team', role: 'Dev', role_prompt: 'Dev.' },
      },
      'worktree_mismatch',
    );
    // A real project id is adopted by the first non-sentinel joiner of an empty channel.
    sim.ok(createCmd({ channel: 'real' }));
    sim.ok({ op: 'join', caller: caller('sess_c'), args: { channel: 'real', role: 'Lead', role_prompt: 'Lead.' } });
    expect(sim.ch('real').project_id).toBe(PROJECT);
  });
});

describe('operator reads', () => {
  function world() {
    const sim = new Sim();
    sim.channel('team', [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer', 'pull'],
    ]);
    sim.ok(createCmd({ channel: 'empty', max_members: 3 }));
    sim.send('sess_a', 'team', 'for the reviewer');
    return sim;
  }

  it('session_list: live cards with agent states, tombstones skipped, every archive', () => {
    const sim = world();
    sim.ok(createCmd({ channel: 'old' }));
    sim.ok({ op: 'save_session', actor: gui, args: { channel: 'old', summary: 'done' } });
    const before = structuredClone(sim.state);
    const o = sim.ok({ op: 'session_list', archives: [...sim.archives.values()] });
    expect(o.changed).toBe(false);
    expect(sim.state).toEqual(before);
    const d = dataOf<{ live: Array<Record<string, unknown>>; archived: Array<Record<string, unknown>> }>(o);
    expect(d.live.map((c) => c.name)).toEqual(['empty', 'team']);
    expect(d.live[0]).toMatchObject({
      lifecycle: 'active',
      max_members: 3,
      paused: false,
      description: null,
      parent_channel_id: null,
      agents: [],
    });
    expect(d.live[1]!.agents).toEqual([
      {
        session_id: 'sess_a',
        role: 'Lead',
        host: 'host-push',
        surface: 'cli',
        delivery_mode: 'push',
        stale: false,
        state: 'Idle',
      },
      {
        session_id: 'sess_b',
        role: 'Reviewer',
        host: 'host-mcp',
        surface: 'mcp',
        delivery_mode: 'pull',
        stale: false,
        state: 'Working',
      },
    ]);
    expect(d.archived).toMatchObject([{ name: 'old', message_count: 0, roles: [] }]);
  });

  it('session_get: a live roster (with the compact context of a restored channel) or the archive view', () => {
    const sim = world();
    expect(dataOf(sim.ok({ op: 'session_get', args: { channel: 'TEAM' } }))).toMatchObject({
      kind: 'live',
      name: 'team',
      compact_context: null,
      agents: [
        { role: 'Lead', state: 'Idle' },
        { role: 'Reviewer', state: 'Working' },
      ],
    });
    sim.ok({ op: 'save_session', actor: gui, args: { channel: 'team', summary: 'Reviewed X.' } });
    const archive = [...sim.archives.values()][0]!;
    const saved = dataOf(sim.ok({ op: 'session_get', args: { channel: 'team' }, archive }));
    expect(saved).toMatchObject({
      kind: 'archived',
      name: 'team',
      archive_id: archive.channel_id,
      summary: 'Reviewed X.',
      message_count: 1,
    });
    expect((saved.agents as Array<{ state: string }>).map((a) => a.state)).toEqual(['Offline', 'Offline']);
    // Without its archive a saved name is a tombstone; a missing one is not found.
    sim.refuse({ op: 'session_get', args: { channel: 'team' }, archive: null }, 'lifecycle_refused');
    sim.refuse({ op: 'session_get', args: { channel: 'nope' } }, 'channel_not_found');
    sim.refuse({ op: 'session_get', args: { channel: 'chn_unknown' } }, 'channel_not_found');
    sim.refuse({ op: 'session_get', args: { channel: 'Bad Name' } }, 'invalid_channel_name');

    sim.ok({ op: 'resume_session', actor: gui, args: { channel: 'team' }, archive });
    const resumed = dataOf(sim.ok({ op: 'session_get', args: { channel: 'team' }, archive }));
    expect(resumed).toMatchObject({ kind: 'live', parent_channel_id: archive.channel_id, agents: [] });
    expect(String(resumed.compact_context)).toContain('Reviewed X.');
  });

  it('deliveries: the machine view of a live channel; refusals for missing and saved ones', () => {
    const sim = world();
    const view = dataOf(sim.ok({ op: 'deliveries', args: { channel: 'team' } }));
    expect(view).toMatchObject({ name: 'team', channel_state: 'active', now: sim.now });
    expect(view.envelopes).toMatchObject([
      { recipient_role: 'Reviewer', delivery_status: 'pending', held_by: 'awaiting_pull' },
    ]);
    sim.refuse({ op: 'deliveries', args: { channel: 'nope' } }, 'channel_not_found');
    sim.ok({ op: 'save_session', actor: gui, args: { channel: 'team' } });
    sim.refuse({ op: 'deliveries', args: { channel: 'team' } }, 'lifecycle_refused');
  });
});
