// The chess clock (protocol.md "Timer, kick, saved channels"): one member's clock runs at a time; advisory, never blocks.
import { applyOps, raw, type Op } from '../protocol/draft.ts';
import { ok, refuse } from '../protocol/result.ts';
import type { Channel, State } from '../protocol/schema.ts';
import { findMember, memberChannel } from './lookup.ts';
import { answered, done, refused } from './outcome.ts';
import { resolveRecipients } from './recipients.ts';
import type { Env, Outcome } from './types.ts';

type Timer = Channel['timer'];

/** Elapsed time per member with the running segment counted (a copy). */
function elapsedAt(t: Timer, now: number): Record<string, number> {
  const elapsed = { ...t.elapsed_ms };
  if (t.active_member_id !== null && t.segment_started_at !== null)
    elapsed[t.active_member_id] = (elapsed[t.active_member_id] ?? 0) + Math.max(0, now - t.segment_started_at);
  return elapsed;
}

/** The clock stopped (the running segment added to its owner), and started for `start` at `now`
 *  when given: one write of the channel's timer (a path relative to the channel), read from the
 *  plain channel. Whole, not field by field: a process catching up replays one operation, not three. */
export function clockOps(ch: Channel, now: number, start: string | null = null): Op[] {
  const t = raw(ch).timer;
  return [
    [
      's',
      ['timer'],
      { ...t, elapsed_ms: elapsedAt(t, now), active_member_id: start, segment_started_at: start === null ? null : now },
    ],
  ];
}

/** Adds the running segment to its owner and stops the clock. */
export const foldClock = (ch: Channel, now: number) => void applyOps(ch, clockOps(ch, now));

export const switchClockTo = (ch: Channel, sid: string, now: number) => void applyOps(ch, clockOps(ch, now, sid));

/** Folds only if the departing member's clock is the running one. */
export function foldClockOf(ch: Channel, sid: string, now: number) {
  if (ch.timer.active_member_id === sid) foldClock(ch, now);
}

export function timerStatus(ch: Channel, now: number) {
  const t = ch.timer;
  const elapsed = elapsedAt(t, now);
  const byRole: Record<string, number> = {};
  for (const [sid, ms] of Object.entries(elapsed)) {
    const role = findMember(ch, sid)?.role ?? sid;
    byRole[role] = (byRole[role] ?? 0) + ms;
  }
  const total = Object.values(elapsed).reduce((a, b) => a + b, 0);
  const limited = t.limit_member_id === null ? total : (elapsed[t.limit_member_id] ?? 0);
  return {
    active_member_id: t.active_member_id,
    elapsed_ms_by_member: elapsed,
    elapsed_ms_by_role: byRole,
    total_ms: total,
    limit_ms: t.limit_ms,
    limit_member_id: t.limit_member_id,
    limit_reached: t.limit_ms !== null && limited >= t.limit_ms,
  };
}

export const TIMER_ACTIONS = ['start', 'stop', 'switch', 'reset', 'status', 'set_limit', 'clear_limit'] as const;

export interface TimerArgs {
  channel: unknown;
  action: unknown;
  limit_ms?: unknown;
  to?: unknown;
}

export function timer(state: State, sid: string, args: TimerArgs, env: Env): Outcome {
  const scoped = memberChannel(state, args.channel, sid);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const { ch, me } = scoped;
  const action = typeof args.action === 'string' ? args.action.trim().toLowerCase() : '';
  const t = ch.timer;
  const answer = (msg: string, changed = true) => (changed ? done : answered)(state, ok(msg, timerStatus(ch, env.now)));
  switch (action) {
    case 'status':
      return answer('Timer status.', false);
    case 'start':
      if (t.active_member_id === sid) return answer('Your clock is already running.', false);
      switchClockTo(ch, sid, env.now);
      return answer(`${me.role}'s clock is running.`);
    case 'stop':
      if (t.active_member_id === null) return answer('The clock is already stopped.', false);
      foldClock(ch, env.now);
      return answer('Clock stopped.');
    case 'switch': {
      const target = resolveRecipients(ch, me, args.to, false);
      if (!Array.isArray(target)) return refused(state, target);
      switchClockTo(ch, target[0]!.session_id, env.now);
      return answer(`${target[0]!.role}'s clock is running.`);
    }
    case 'reset':
      foldClock(ch, env.now); // writes a new timer: `t` is the one before
      ch.timer.elapsed_ms = {};
      return answer('Clock reset to zero (the limit is kept).');
    case 'set_limit': {
      const limit =
        typeof args.limit_ms === 'number'
          ? args.limit_ms
          : typeof args.limit_ms === 'string'
            ? Number(args.limit_ms)
            : NaN;
      if (!Number.isFinite(limit) || limit <= 0)
        return refused(state, refuse('invalid_limit', 'limit_ms must be a positive finite number of milliseconds.'));
      let target: string | null = null;
      if (typeof args.to === 'string' && args.to.trim()) {
        const key = args.to.trim();
        const m =
          ch.members.find((x) => x.session_id === key) ??
          ch.members.find((x) => x.role.toLowerCase() === key.toLowerCase());
        if (!m)
          return refused(
            state,
            refuse('target_not_found', `No member matches "${key}".`, {
              members: ch.members.map((x) => `${x.role} (${x.session_id})`),
            }),
          );
        target = m.session_id;
      }
      t.limit_ms = limit;
      t.limit_member_id = target;
      return answer(
        target ? `Limit of ${limit} ms set for ${findMember(ch, target)!.role}.` : `Total limit of ${limit} ms set.`,
      );
    }
    case 'clear_limit':
      t.limit_ms = null;
      t.limit_member_id = null;
      return answer('Limit cleared.');
    default:
      return refused(
        state,
        refuse('invalid_timer_action', `Unknown timer action. Use one of: ${TIMER_ACTIONS.join(', ')}.`, {
          valid_actions: [...TIMER_ACTIONS],
        }),
      );
  }
}
