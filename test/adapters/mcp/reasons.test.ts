// Every refusal reason the MCP surface can return (FEATURES.md §3.2–§3.4, §7.2), each reached by
// its own self-contained scenario through real `opencomms mcp` servers, grouped by tool family.
// The table is keyed by reason and must cover REASONS minus the documented non-MCP ones
// (NOT_THROUGH_MCP): a new reason without a scenario fails tsc and the coverage case below.
// A refused call leaves state.json byte-identical unless the scenario says why not.
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REASONS } from '../../../src/protocol/result.ts';
import { resolvePaths } from '../../../src/store/paths.ts';
import { withLock } from '../../../src/store/file/lock.ts';
import { LOCK_TIMEOUT_MS, MAX_STATE_FILE_BYTES } from '../../../src/protocol/limits.ts';
import { withReadOnly } from '../../helpers/read-only.ts';
import {
  editState,
  ok,
  pair,
  pinFor,
  refused,
  statePath,
  useMcpProject,
  type McpHandle,
  type Result,
} from '../../helpers/mcp-fixture.ts';
import { MCP_REASONS, NOT_THROUGH_MCP, type McpReason } from '../../helpers/mcp-spec.ts';
import { stateBytes } from '../../helpers/state-files.ts';

const projA = { OPENCOMMS_PROJECT_ID: 'proj-a' };
const p = useMcpProject({
  A: { pin: pinFor('a'), admin: true, env: projA },
  B: { pin: pinFor('b'), env: projA },
  C: { pin: pinFor('c'), env: projA },
  E: { pin: pinFor('e'), env: { OPENCOMMS_PROJECT_ID: 'proj-b' } }, // never joins anything
  U: {}, // unpinned
});

/** Issue 8 item 3: a non-create call naming a malformed channel that does not exist is
 *  `channel_not_found`, like any missing name. */
const SEND_TO_MALFORMED_MISSING_CHANNEL: McpReason = 'channel_not_found';

/** The state files as bytes (state.json and its journals), `<directory>` when something else
 *  stands where state.json should be, null when absent. */
function snapshot(): string | null {
  try {
    return stateBytes(p.dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'EISDIR') return '<directory>';
    throw e;
  }
}

/** The file's servers, their pins, and the scenario's own refusal assertion. */
type Ctx = typeof p.h & {
  pin: typeof p.pin;
  /** A refusal whose reason is the table key; state.json must not change unless `writes` says why. */
  refuse(h: McpHandle, tool: string, args: Record<string, unknown>, opts?: { writes?: string }): Promise<Result>;
};
type Scenario = (t: Ctx) => Promise<void>;

/** Replaces the (existing) state.json by `bad`, bytes or a directory, for the duration of `fn`,
 *  then puts the real one back. */
async function withBrokenStateFile(bad: string | 'directory', fn: () => Promise<void>) {
  const file = statePath(p.dir);
  const kept = `${file}.kept`;
  renameSync(file, kept);
  try {
    if (bad === 'directory') mkdirSync(file);
    else writeFileSync(file, bad);
    await fn();
  } finally {
    rmSync(file, { recursive: true, force: true });
    renameSync(kept, file);
  }
}

const SCENARIOS: Record<McpReason, Scenario> = {
  // ---- identity (§7.2) ---------------------------------------------------------------------------
  async identity_unpinned(t) {
    expect((await t.refuse(t.U, 'opencomms_status', {})).message).toContain('OPENCOMMS_MEMBER_ID');
  },
  async identity_not_member(t) {
    await pair(t.A, t.B, 'identity_not_member');
    await t.refuse(t.E, 'opencomms_send', { channel: 'identity_not_member', content: 'let me in' });
  },

  // ---- create / join (§3.2, §3.3) ----------------------------------------------------------------
  async invalid_channel_name(t) {
    await t.refuse(t.A, 'opencomms_create', { channel: 'Bad Name!', role: 'Alpha', role_prompt: 'p' });
    await t.refuse(t.A, 'opencomms_create', { channel: 'x'.repeat(65), role: 'Alpha', role_prompt: 'p' });
    await ok(t.A, 'opencomms_create', { channel: 'x'.repeat(64), role: 'Alpha', role_prompt: 'p' });
    await ok(t.A, 'opencomms_save_session', { channel: 'x'.repeat(64) });
    await t.refuse(t.A, 'opencomms_resume_session', { channel: 'x'.repeat(64), new_name: 'Bad Name!' });
  },
  async role_prompt_required(t) {
    await t.refuse(t.A, 'opencomms_create', { channel: 'role_prompt_required', role: 'Alpha', role_prompt: '   ' });
    await ok(t.A, 'opencomms_create', { channel: 'role_prompt_required', role: 'Alpha', role_prompt: 'p' });
    await t.refuse(t.C, 'opencomms_join', { channel: 'role_prompt_required', role: 'Gamma', role_prompt: ' ' }); // the prompt is checked last
  },
  async invalid_role(t) {
    await t.refuse(t.A, 'opencomms_create', { channel: 'invalid_role', role: '9lives', role_prompt: 'p' });
    await t.refuse(t.C, 'opencomms_join', { channel: 'invalid_role-missing', role: '1bad', role_prompt: 'p' }); // the role before the channel
  },
  async channel_exists(t) {
    await ok(t.A, 'opencomms_create', { channel: 'channel_exists', role: 'Alpha', role_prompt: 'p' });
    expect(
      (await t.refuse(t.B, 'opencomms_create', { channel: 'Channel_Exists', role: 'Beta', role_prompt: 'p' })).message,
    ).toMatch(/join/i);
    // A restore under an explicit name that a live channel holds.
    await ok(t.A, 'opencomms_create', { channel: 'channel_exists-saved', role: 'Alpha', role_prompt: 'p' });
    await ok(t.A, 'opencomms_save_session', { channel: 'channel_exists-saved' });
    await t.refuse(t.A, 'opencomms_resume_session', { channel: 'channel_exists-saved', new_name: 'channel_exists' });
  },
  async channel_not_found(t) {
    expect(
      (await t.refuse(t.C, 'opencomms_join', { channel: 'channel_not_found', role: 'Gamma', role_prompt: 'p' }))
        .message,
    ).toMatch(/Do not create/);
    await ok(t.A, 'opencomms_create', { channel: 'channel_not_found-home', role: 'Alpha', role_prompt: 'p' }); // A passes the roster gate
    await t.refuse(t.A, 'opencomms_send', { channel: 'channel_not_found', content: 'x' });
    await t.refuse(t.A, 'opencomms_kick', { channel: 'channel_not_found', target_role: 'Gamma' });
    await refused(t.A, 'opencomms_send', { channel: '!!', content: 'x' }, SEND_TO_MALFORMED_MISSING_CHANNEL);
  },
  async role_taken(t) {
    await pair(t.A, t.B, 'role_taken');
    await t.refuse(t.C, 'opencomms_join', { channel: 'role_taken', role: '  beta  ', role_prompt: 'p' });
    await t.refuse(t.C, 'opencomms_join', { channel: 'role_taken', role: 'ALPHA', role_prompt: 'p' });
  },
  async already_member(t) {
    await pair(t.A, t.B, 'already_member');
    expect(
      (await t.refuse(t.B, 'opencomms_join', { channel: 'already_member', role: 'Other', role_prompt: 'p' })).data.role,
    ).toBe('Beta');
  },
  async channel_full(t) {
    const full = await pair(t.A, t.B, 'channel_full', { max_members: 1 });
    expect(full.data.settings.max_members).toBe(2); // clamped
    await t.refuse(t.C, 'opencomms_join', { channel: 'channel_full', role: 'Alpha', role_prompt: 'p' }); // the cap before the role
    await t.refuse(t.C, 'opencomms_join', { channel: 'channel_full', role: 'Gamma', role_prompt: 'p' });
  },
  async project_mismatch(t) {
    await ok(t.A, 'opencomms_create', { channel: 'project_mismatch', role: 'Alpha', role_prompt: 'p' });
    expect(
      (await t.refuse(t.E, 'opencomms_join', { channel: 'project_mismatch', role: 'Epsilon', role_prompt: 'p' }))
        .message,
    ).toMatch(/never relink/i);
  },
  async worktree_mismatch(t) {
    // The member on this computer works in another directory (the project was moved, say).
    await ok(t.A, 'opencomms_create', { channel: 'worktree_mismatch', role: 'Alpha', role_prompt: 'p' });
    editState(p.dir, (s) => {
      s.channels.worktree_mismatch.worktree = '/somewhere/else';
      s.channels.worktree_mismatch.members[0].worktree = '/somewhere/else';
    });
    expect(
      (await t.refuse(t.B, 'opencomms_join', { channel: 'worktree_mismatch', role: 'Beta', role_prompt: 'p' })).message,
    ).toContain('/somewhere/else');
  },
  async lifecycle_refused(t) {
    await pair(t.A, t.B, 'lifecycle_refused');
    await ok(t.A, 'opencomms_save_session', { channel: 'lifecycle_refused' });
    const r = await t.refuse(t.C, 'opencomms_join', { channel: 'lifecycle_refused', role: 'Gamma', role_prompt: 'p' });
    expect(r.data).toMatchObject({ lifecycle: 'saved', hint: expect.stringContaining('opencomms_resume_session') });
  },

  // ---- membership of a named channel -------------------------------------------------------------
  async not_member(t) {
    await pair(t.A, t.B, 'not_member');
    await ok(t.C, 'opencomms_create', { channel: 'not_member-home', role: 'Gamma', role_prompt: 'p' }); // C passes the roster gate
    for (const [tool, args] of [
      ['opencomms_send', { content: 'x' }],
      ['opencomms_inbox', {}],
      ['opencomms_history', {}],
      ['opencomms_pull', {}],
      ['opencomms_update_role', { role_prompt: 'p' }],
      ['opencomms_pause', {}],
      ['opencomms_resume', {}],
      ['opencomms_disconnect', {}],
      ['opencomms_timer', { action: 'status' }],
      ['opencomms_save_session', {}],
      ['opencomms_delete_session', { confirm: true }],
    ] as const)
      expect((await t.refuse(t.C, tool, { channel: 'not_member', ...args })).message).toMatch(/join/i);
    await t.refuse(t.A, 'opencomms_kick', { channel: 'not_member-home', target_role: 'Gamma' }); // an --admin server, not a member there
  },

  // ---- send (§3.2 send, §5.3) --------------------------------------------------------------------
  async channel_paused(t) {
    await pair(t.A, t.B, 'channel_paused');
    await ok(t.B, 'opencomms_pause', { channel: 'channel_paused' });
    expect((await t.refuse(t.A, 'opencomms_send', { channel: 'channel_paused', content: 'x' })).message).toMatch(
      /opencomms_resume/,
    );
  },
  async content_empty(t) {
    await pair(t.A, t.B, 'content_empty');
    await t.refuse(t.A, 'opencomms_send', { channel: 'content_empty', content: ' \n\t ' });
  },
  async content_too_large(t) {
    await pair(t.A, t.B, 'content_too_large');
    expect(
      (await t.refuse(t.A, 'opencomms_send', { channel: 'content_too_large', content: 'x'.repeat(100_001) })).data
        .limit,
    ).toBe(100_000);
    await ok(t.A, 'opencomms_send', { channel: 'content_too_large', content: 'y'.repeat(100_000) }); // exactly the cap
  },
  async invalid_message_type(t) {
    await pair(t.A, t.B, 'invalid_message_type');
    const sys = await t.refuse(t.A, 'opencomms_send', {
      channel: 'invalid_message_type',
      content: 'x1',
      type: 'system',
    });
    expect(sys.data.valid_types).toEqual(['review_request', 'review_response', 'manual']);
    await t.refuse(t.A, 'opencomms_send', { channel: 'invalid_message_type', content: 'x2', type: 'bogus' });
  },
  async invalid_argument(t) {
    await pair(t.A, t.B, 'invalid_argument');
    expect(
      (
        await t.refuse(t.A, 'opencomms_send', {
          channel: 'invalid_argument',
          content: 'x',
          to: 'Beta',
          broadcast: true,
        })
      ).data.field,
    ).toBe('to');
    await t.refuse(t.A, 'opencomms_archive', { mode: 'bogus' });
    await t.refuse(t.A, 'opencomms_archive', { mode: 'summary' }); // summary needs a channel
  },
  async no_recipient(t) {
    await ok(t.A, 'opencomms_create', { channel: 'no_recipient', role: 'Alpha', role_prompt: 'p' });
    await t.refuse(t.A, 'opencomms_send', { channel: 'no_recipient', content: 'anyone?' });
    await t.refuse(t.A, 'opencomms_send', { channel: 'no_recipient', content: 'anyone?', broadcast: true });
    await t.refuse(t.A, 'opencomms_timer', { channel: 'no_recipient', action: 'switch' });
  },
  async recipient_not_found(t) {
    await pair(t.A, t.B, 'recipient_not_found');
    const nf = await t.refuse(t.A, 'opencomms_send', { channel: 'recipient_not_found', content: 'x', to: 'Nobody' });
    expect(nf.data.members).toEqual([`Beta (${t.pin.B})`]);
    await t.refuse(t.A, 'opencomms_send', { channel: 'recipient_not_found', content: 'x', to: t.pin.A }); // naming yourself
    await t.refuse(t.A, 'opencomms_timer', { channel: 'recipient_not_found', action: 'switch', to: 'Ghost' });
  },
  async recipient_ambiguous(t) {
    await pair(t.A, t.B, 'recipient_ambiguous');
    await ok(t.C, 'opencomms_join', { channel: 'recipient_ambiguous', role: 'Gamma', role_prompt: 'p' });
    await t.refuse(t.A, 'opencomms_send', { channel: 'recipient_ambiguous', content: 'which one?' });
    await t.refuse(t.A, 'opencomms_timer', { channel: 'recipient_ambiguous', action: 'switch' });
    const one = await ok(t.A, 'opencomms_send', { channel: 'recipient_ambiguous', content: 'to gamma', to: 'gamma' });
    expect(one.data.recipients.map((r: { session_id: string }) => r.session_id)).toEqual([t.pin.C]);
    const all = await ok(t.A, 'opencomms_send', { channel: 'recipient_ambiguous', content: 'to all', broadcast: true });
    expect(all.data.recipients.map((r: { session_id: string }) => r.session_id)).toEqual([t.pin.B, t.pin.C]);
  },
  async recipient_stale(t) {
    await pair(t.A, t.B, 'recipient_stale');
    // The operator marks B's row stale (a direct state edit).
    editState(p.dir, (s) => {
      const m = s.channels.recipient_stale.members.find((x: { session_id: string }) => x.session_id === t.pin.B);
      m.stale = true;
      m.stale_at = Date.now();
    });
    await t.refuse(t.A, 'opencomms_send', { channel: 'recipient_stale', content: 'hello?' });
    await t.refuse(t.A, 'opencomms_send', { channel: 'recipient_stale', content: 'hello?', to: 'Beta' });
    await t.refuse(t.A, 'opencomms_send', { channel: 'recipient_stale', content: 'hello?', broadcast: true });
    await t.refuse(t.A, 'opencomms_timer', { channel: 'recipient_stale', action: 'switch' });
  },
  async rate_limited(t) {
    // Across senders; refused sends consume nothing.
    const rl = await pair(t.A, t.B, 'rate_limited', { rate_limit: 1 });
    expect(rl.data.settings.rate_limit).toBe(1);
    await ok(t.A, 'opencomms_send', { channel: 'rate_limited', content: 'r1' });
    expect((await t.refuse(t.A, 'opencomms_send', { channel: 'rate_limited', content: 'r2' })).data.rate_limit).toBe(1);
    await t.refuse(t.B, 'opencomms_send', { channel: 'rate_limited', content: 'r3' });
  },
  async duplicate_content(t) {
    // The same sender only.
    await pair(t.A, t.B, 'duplicate_content');
    await ok(t.A, 'opencomms_send', { channel: 'duplicate_content', content: 'same text' });
    await t.refuse(t.A, 'opencomms_send', { channel: 'duplicate_content', content: 'same text' });
    await ok(t.B, 'opencomms_send', { channel: 'duplicate_content', content: 'same text' });
  },
  async hop_limit_exceeded(t) {
    // max_hops 1; a reply_to naming no known message starts a new chain.
    await pair(t.A, t.B, 'hop_limit_exceeded', { max_hops: 1 });
    const h0 = (await ok(t.A, 'opencomms_send', { channel: 'hop_limit_exceeded', content: 'h0' })).data.message_ids[0];
    const h1 = await ok(t.B, 'opencomms_send', { channel: 'hop_limit_exceeded', content: 'h1', reply_to: h0 });
    expect(h1.data.hop_count).toBe(1);
    const hx = await t.refuse(t.A, 'opencomms_send', {
      channel: 'hop_limit_exceeded',
      content: 'h2',
      reply_to: h1.data.message_ids[0],
    });
    expect(hx.data.max_hops).toBe(1);
    const fresh = await ok(t.A, 'opencomms_send', {
      channel: 'hop_limit_exceeded',
      content: 'h3',
      reply_to: `ocm_${'0'.repeat(32)}`,
    });
    expect(fresh.data.hop_count).toBe(0);
  },
  async budget_exhausted(t) {
    // One hand-over allowed.
    const bud = await pair(t.A, t.B, 'budget_exhausted', { budget_messages: 1 });
    expect(bud.data.settings.budgets).toEqual({
      max_runtime_ms: null,
      max_delivered_messages: 1,
      max_wakes_per_member: 60,
      max_wakes_per_channel: 240,
    });
    await ok(t.A, 'opencomms_send', { channel: 'budget_exhausted', content: 'one' });
    expect((await ok(t.B, 'opencomms_pull', { channel: 'budget_exhausted' })).data.messages).toHaveLength(1);
    expect((await t.refuse(t.A, 'opencomms_send', { channel: 'budget_exhausted', content: 'two' })).data.budget).toBe(
      'messages',
    );
  },
  async pull_not_allowed(t) {
    // The operator takes pull away from B's endpoint (a capabilities override in the member row).
    await pair(t.A, t.B, 'pull_not_allowed');
    await ok(t.A, 'opencomms_send', { channel: 'pull_not_allowed', content: 'waiting' });
    editState(p.dir, (s) => {
      const m = s.channels.pull_not_allowed.members.find((x: { session_id: string }) => x.session_id === t.pin.B);
      m.capabilities = { pull: false };
    });
    await t.refuse(t.B, 'opencomms_pull', { channel: 'pull_not_allowed' });
    await t.refuse(t.B, 'opencomms_pull', {});
    expect((await ok(t.B, 'opencomms_inbox', { channel: 'pull_not_allowed' })).data.pending).toBe(1); // nothing was taken
  },

  // ---- kick (§3.2 kick, §5.9) --------------------------------------------------------------------
  async not_coordinator(t) {
    await ok(t.B, 'opencomms_create', { channel: 'not_coordinator', role: 'Beta', role_prompt: 'p' });
    await ok(t.A, 'opencomms_join', { channel: 'not_coordinator', role: 'Alpha', role_prompt: 'p' });
    expect(
      (await t.refuse(t.A, 'opencomms_kick', { channel: 'not_coordinator', target_role: 'Beta' })).data
        .coordinator_role,
    ).toBe('Beta');
  },
  async target_required(t) {
    await pair(t.A, t.B, 'target_required');
    await t.refuse(t.A, 'opencomms_kick', { channel: 'target_required' });
  },
  async cannot_kick_self(t) {
    await pair(t.A, t.B, 'cannot_kick_self');
    await t.refuse(t.A, 'opencomms_kick', { channel: 'cannot_kick_self', target_session_id: t.pin.A });
    expect(
      (await t.refuse(t.A, 'opencomms_kick', { channel: 'cannot_kick_self', target_role: 'alpha' })).message,
    ).toMatch(/opencomms_disconnect/);
  },
  async target_not_found(t) {
    await pair(t.A, t.B, 'target_not_found');
    expect(
      (await t.refuse(t.A, 'opencomms_kick', { channel: 'target_not_found', target_role: 'Ghost' })).data.members,
    ).toContain(`Beta (${t.pin.B})`);
    await t.refuse(t.A, 'opencomms_timer', {
      channel: 'target_not_found',
      action: 'set_limit',
      limit_ms: 10,
      to: 'Ghost',
    });
  },

  // ---- timer (§3.2 timer, §5.8) ------------------------------------------------------------------
  async invalid_timer_action(t) {
    await pair(t.A, t.B, 'invalid_timer_action');
    const r = await t.refuse(t.A, 'opencomms_timer', { channel: 'invalid_timer_action', action: 'explode' });
    expect(r.data.valid_actions).toEqual(['start', 'stop', 'switch', 'reset', 'status', 'set_limit', 'clear_limit']);
  },
  async invalid_limit(t) {
    await pair(t.A, t.B, 'invalid_limit');
    await t.refuse(t.A, 'opencomms_timer', { channel: 'invalid_limit', action: 'set_limit', limit_ms: 0 });
    await t.refuse(t.A, 'opencomms_timer', { channel: 'invalid_limit', action: 'set_limit', limit_ms: -5 });
    await t.refuse(t.A, 'opencomms_timer', { channel: 'invalid_limit', action: 'set_limit' });
  },

  // ---- sessions (§3.2, §5.10) --------------------------------------------------------------------
  async summary_too_large(t) {
    await pair(t.A, t.B, 'summary_too_large');
    await t.refuse(t.A, 'opencomms_save_session', { channel: 'summary_too_large', summary: 's'.repeat(2001) });
    await ok(t.A, 'opencomms_save_session', { channel: 'summary_too_large', summary: 's'.repeat(2000) });
  },
  async confirm_required(t) {
    await pair(t.A, t.B, 'confirm_required');
    await t.refuse(t.A, 'opencomms_delete_session', { channel: 'confirm_required', confirm: false });
  },
  async archive_not_found(t) {
    await ok(t.A, 'opencomms_create', { channel: 'archive_not_found-home', role: 'Alpha', role_prompt: 'p' });
    await t.refuse(t.A, 'opencomms_archive', { mode: 'summary', channel: 'archive_not_found' });
    await t.refuse(t.A, 'opencomms_archive', { mode: 'messages', channel: 'chn_0000' });
    await t.refuse(t.A, 'opencomms_resume_session', { channel: 'archive_not_found' });
  },
  async not_archived_member(t) {
    await pair(t.A, t.B, 'not_archived_member');
    await ok(t.A, 'opencomms_save_session', { channel: 'not_archived_member' });
    await t.refuse(t.C, 'opencomms_resume_session', { channel: 'not_archived_member' });
    await t.refuse(t.C, 'opencomms_delete_session', { channel: 'not_archived_member', confirm: true });
    await t.refuse(t.C, 'opencomms_archive', { mode: 'summary', channel: 'not_archived_member' });
  },
  async resume_ladder_exhausted(t) {
    // §4 / LCY-5: base, then base-r2 … base-r9, then resume_ladder_exhausted; an explicit new_name still works.
    await ok(t.A, 'opencomms_create', { channel: 'lad', role: 'Alpha', role_prompt: 'p' });
    await ok(t.A, 'opencomms_save_session', { channel: 'lad' });
    const names: string[] = [];
    for (let i = 0; i < 9; i++) names.push((await ok(t.A, 'opencomms_resume_session', { channel: 'lad' })).data.name);
    expect(names).toEqual(['lad', 'lad-r2', 'lad-r3', 'lad-r4', 'lad-r5', 'lad-r6', 'lad-r7', 'lad-r8', 'lad-r9']);
    expect((await t.refuse(t.A, 'opencomms_resume_session', { channel: 'lad' })).message).toMatch(/new_name/);
    expect((await ok(t.A, 'opencomms_resume_session', { channel: 'lad', new_name: 'lad-extra' })).data.name).toBe(
      'lad-extra',
    );
  },

  // ---- the state file (§2.7, §2.10) --------------------------------------------------------------
  async state_busy(t) {
    // Another process holds the lock (refreshing it) for longer than the 5 s a writer waits.
    await pair(t.A, t.B, 'state_busy');
    let release!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = withLock(
      resolvePaths(p.dir),
      () =>
        new Promise<void>((r) => {
          release = r;
          locked();
        }),
    );
    await isLocked;
    const t0 = performance.now();
    try {
      await t.refuse(t.A, 'opencomms_send', { channel: 'state_busy', content: 'while locked' });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(LOCK_TIMEOUT_MS - 50);
    } finally {
      release();
      await holder;
    }
    await ok(t.A, 'opencomms_send', { channel: 'state_busy', content: 'after the lock' });
  },
  async state_incompatible(t) {
    // A state file of another schema version: refused, never overwritten. (Roster-gated tools
    // through MCP are issue 8 item 2; a bootstrap tool reaches the store directly.)
    const other = '{"schema_version": 3, "from": "the future"}\n';
    await ok(t.A, 'opencomms_create', { channel: 'state_incompatible-home', role: 'Alpha', role_prompt: 'p' });
    await withBrokenStateFile(other, async () => {
      const r = await t.refuse(t.A, 'opencomms_create', {
        channel: 'state_incompatible',
        role: 'Alpha',
        role_prompt: 'p',
      });
      expect(r.data.schema_version).toBe(3);
      expect(readFileSync(statePath(p.dir), 'utf8')).toBe(other);
    });
  },
  async state_unreadable(t) {
    // Something that cannot be read as a file stands where state.json should be.
    await ok(t.A, 'opencomms_create', { channel: 'state_unreadable-home', role: 'Alpha', role_prompt: 'p' });
    await withBrokenStateFile('directory', async () => {
      expect(
        (await t.refuse(t.A, 'opencomms_create', { channel: 'state_unreadable', role: 'Alpha', role_prompt: 'p' })).data
          .code,
      ).toBe('EISDIR');
    });
  },
  async store_unwritable(t) {
    // A read-only .opencomms: a send and a pull are refused with what to do, not "Retry once";
    // once writable again the mail sent before arrives exactly once.
    await pair(t.A, t.B, 'store_unwritable');
    const sent = (await ok(t.A, 'opencomms_send', { channel: 'store_unwritable', content: 'before the remount' })).data
      .message_ids[0];
    await withReadOnly(p.dir, async () => {
      const send = await t.refuse(t.A, 'opencomms_send', { channel: 'store_unwritable', content: 'while read-only' });
      const pull = await t.refuse(t.B, 'opencomms_pull', { channel: 'store_unwritable' });
      for (const r of [send, pull]) {
        expect(r.message).toContain('opencomms doctor');
        expect(r.message).not.toMatch(/Retry once|\bat .*:\d+/);
      }
    });
    expect((await ok(t.B, 'opencomms_pull', { channel: 'store_unwritable' })).data.message_ids).toEqual([sent]);
  },
  async state_too_large(t) {
    // A state.json over the cap (a sparse 600 MB file, no data written) is refused before it is
    // read, and left as it is. Compared by size and time: reading it back would be the fault.
    await ok(t.A, 'opencomms_create', { channel: 'state_too_large-home', role: 'Alpha', role_prompt: 'p' });
    const file = statePath(p.dir);
    renameSync(file, `${file}.kept`);
    try {
      // Put in place whole by a rename, as a writer would: an empty file in between is another fault.
      writeFileSync(`${file}.big`, '');
      truncateSync(`${file}.big`, 600 * 1024 * 1024);
      renameSync(`${file}.big`, file);
      const before = statSync(file);
      const r = await t.refuse(
        t.A,
        'opencomms_create',
        { channel: 'state_too_large', role: 'Alpha', role_prompt: 'p' },
        { writes: 'none: compared by size and mtime below' },
      );
      expect(r.message).toContain(`${MAX_STATE_FILE_BYTES / 1024 / 1024} MiB`);
      expect(r.data.bytes).toBe(600 * 1024 * 1024);
      const after = statSync(file);
      expect([after.size, after.mtimeMs]).toEqual([before.size, before.mtimeMs]);
    } finally {
      rmSync(file, { force: true });
      renameSync(`${file}.kept`, file);
    }
  },
  async internal_error(t) {
    // An unexpected fault on the write path (the history folder is a file, so a delivered envelope
    // cannot be logged): the call answers internal_error without details, and nothing is lost.
    await pair(t.A, t.B, 'internal_error');
    const sent = (await ok(t.A, 'opencomms_send', { channel: 'internal_error', content: 'keep me' })).data
      .message_ids[0];
    const history = resolvePaths(p.dir).history;
    rmSync(history, { recursive: true, force: true });
    writeFileSync(history, 'not a folder');
    try {
      const r = await t.refuse(
        t.B,
        'opencomms_pull',
        { channel: 'internal_error' },
        { writes: 'the fault is recorded in state.errors (§3.4)' },
      );
      expect(r.message).not.toMatch(/EEXIST|ENOTDIR|\bat .*:\d+/);
    } finally {
      rmSync(history, { force: true });
    }
    expect((await ok(t.B, 'opencomms_pull', { channel: 'internal_error' })).data.message_ids).toEqual([sent]);
  },
};

describe('every MCP refusal reason, one self-contained scenario each', () => {
  it.each(Object.entries(SCENARIOS) as Array<[McpReason, Scenario]>)('%s', async (reason, scenario) => {
    let refusals = 0;
    const t: Ctx = {
      ...p.h,
      pin: p.pin,
      async refuse(h, tool, args, opts = {}) {
        const before = opts.writes ? null : snapshot();
        const r = await refused(h, tool, args, reason);
        if (!opts.writes) expect(snapshot(), `${tool} refused with ${reason} changed state.json`).toBe(before);
        refusals++;
        return r;
      },
    };
    await scenario(t);
    expect(refusals).toBeGreaterThan(0);
  });

  it('the table covers every reason the MCP surface can return, and each exemption names a real reason', () => {
    expect(Object.keys(SCENARIOS).sort()).toEqual([...MCP_REASONS].sort());
    for (const r of Object.keys(NOT_THROUGH_MCP)) expect(REASONS).toContain(r);
  });
});
