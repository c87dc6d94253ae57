// The hook runner's fast path decides from an unvalidated glance; it may only ever answer "nothing"
// when that is certain, and must hand anything it cannot read to the full path.
import { describe, expect, it } from 'vitest';
import type { HookContext } from '../../../adapters/claude-code/hook-input.ts';
import { triage } from '../../../adapters/claude-code/shortcut.ts';
import { processTag } from '../../../src/runtime/process.ts';

const ctx = (
  event: HookContext['event'],
  input: Record<string, unknown> = {},
  env: Record<string, string> = {},
): HookContext => ({
  mode: 'event',
  event,
  project: '/p',
  host: 'claude-code',
  input: { session_id: 'c1', ...input },
  env,
  shell: null,
});

const state = (o: { bound?: boolean; stale?: boolean; queue?: string[]; messages?: Record<string, unknown> } = {}) => ({
  kind: 'state' as const,
  state: {
    channels: {
      team: {
        lifecycle: 'active',
        members: [
          {
            session_id: 'sess_a',
            host: 'claude-code',
            host_session_id: o.bound === false ? null : 'c1',
            stale: o.stale ?? false,
          },
        ],
      },
    },
    queues: o.queue ? { sess_a: o.queue } : {},
    messages: o.messages ?? {},
  },
});

describe('hook runner triage', () => {
  it('nothing: no state, no session id, an unknown event, a bound member with an empty queue', () => {
    expect(triage({ kind: 'absent' }, ctx('UserPromptSubmit'))).toBe('nothing');
    expect(triage(state(), ctx('UserPromptSubmit', { session_id: '' }))).toBe('nothing');
    expect(triage(state(), ctx(null))).toBe('nothing');
    expect(triage(state(), ctx('UserPromptSubmit'))).toBe('nothing');
    expect(triage(state(), ctx('Stop'))).toBe('nothing');
  });

  it('full: mail waiting, a stale mark, SessionStart/SessionEnd of a bound session, someone to bind, an unreadable or journalled state', () => {
    expect(triage(state({ queue: ['ocm_1'] }), ctx('UserPromptSubmit'))).toBe('full');
    expect(triage(state({ stale: true }), ctx('UserPromptSubmit'))).toBe('full');
    expect(triage(state(), ctx('SessionStart'))).toBe('full');
    expect(triage(state(), ctx('SessionEnd'))).toBe('full');
    expect(triage(state({ bound: false }), ctx('UserPromptSubmit', { session_id: 'c2' }))).toBe('full');
    expect(triage({ kind: 'unknown' }, ctx('UserPromptSubmit'))).toBe('full');
    expect(triage({ kind: 'state', state: { channels: 3 } }, ctx('UserPromptSubmit'))).toBe('full');
  });

  it('Stop with stop_hook_active hands nothing over, so pending mail alone does not load the full path', () => {
    expect(triage(state({ queue: ['ocm_1'] }), ctx('Stop', { stop_hook_active: true }))).toBe('nothing');
  });

  it("confirm: the woken turn's prompt shows every batch held for this Claude Code (newer mail waits for a later boundary)", () => {
    const tag = processTag(4242);
    const held = { ocm_1: { recipient_session_id: 'sess_a', delivery_status: 'in_flight', in_flight_by: tag } };
    const woke = ctx(
      'UserPromptSubmit',
      { prompt: 'mail: [OpenComms] from Lead | type: manual | id: ocm_1 | reply_to: none' },
      { CLAUDE_PID: '4242' },
    );
    expect(triage(state({ messages: held }), woke)).toBe('confirm');
    expect(triage(state({ messages: held, queue: ['ocm_2'] }), woke)).toBe('confirm');
    expect(triage(state({ messages: held }), { ...woke, input: { ...woke.input, prompt: 'typed by the user' } })).toBe(
      'full',
    );
    expect(triage(state({ messages: held }), { ...woke, env: { CLAUDE_PID: '999' } })).toBe('full');
  });
});
