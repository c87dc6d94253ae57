// update_role, pause, resume, disconnect, kick / operator removal, markStale, clearStale.
import { OPERATOR_ID, OPERATOR_ROLE, SYSTEM_MESSAGE_TYPE } from '../protocol/limits.ts';
import { ok, refuse, type Refusal } from '../protocol/result.ts';
import type { Channel, Envelope, Member, State } from '../protocol/schema.ts';
import { invalidChannelName, memberChannel, memberLabel, normaliseChannelName, tombstoneRefusal } from './lookup.ts';
import { done, refused } from './outcome.ts';
import { setQueue } from './deliver.ts';
import { enforceRetention } from './retention.ts';
import { scanInFlight } from './receipts.ts';
import { foldClockOf } from './timer.ts';
import { acceptedEnvelope, stepChannel, stepEnvelope, stepMember } from './transitions.ts';
import type { Effect, Env, Outcome } from './types.ts';

export function updateRole(state: State, sid: string, args: { channel: unknown; role_prompt: unknown }): Outcome {
  const scoped = memberChannel(state, args.channel, sid);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const prompt = typeof args.role_prompt === 'string' ? args.role_prompt.trim() : '';
  if (!prompt)
    return refused(
      state,
      refuse('role_prompt_required', 'role_prompt is blank: give standing instructions for your role.'),
    );
  scoped.me.role_prompt = prompt;
  return done(
    state,
    ok(`Updated your role prompt on "${scoped.ch.name}".`, { channel_id: scoped.ch.id, role: scoped.me.role }),
  );
}

const pendingFor = (state: State, ch: Channel) =>
  ch.members.filter((m) => (state.queues[m.session_id] ?? []).some((id) => state.messages[id]?.channel_id === ch.id));

/** The channel the operator names: any live channel (the operator is bound by no roster). */
export function operatorChannel(state: State, raw: unknown): { ch: Channel } | { refusal: Refusal } {
  const name = normaliseChannelName(raw);
  if (name === null) return { refusal: invalidChannelName() };
  const ch = state.channels[name];
  if (!ch)
    return {
      refusal: refuse(
        'channel_not_found',
        `No channel "${name}" in this project; \`opencomms channels\` lists the live ones.`,
      ),
    };
  return ch.lifecycle === 'active' ? { ch } : { refusal: tombstoneRefusal(ch) };
}

/** Pause or resume a channel: a member's tool on its own channel, or the operator on any live one;
 *  either way through the channel machine. */
export function setPaused(
  state: State,
  who: string | { operator: true },
  args: { channel: unknown },
  paused: boolean,
  env: Env,
): Outcome {
  const scoped =
    typeof who === 'string' ? memberChannel(state, args.channel, who) : operatorChannel(state, args.channel);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const { ch } = scoped;
  const was = ch.paused;
  stepChannel(ch, { type: paused ? 'PAUSE' : 'RESUME', now: env.now });
  const changed = was !== ch.paused;
  // Resuming releases held mail: the recipients' owners are woken to drain it.
  const wake = !paused && changed ? pendingFor(state, ch).map((m) => m.session_id) : [];
  return done(
    state,
    ok(
      paused
        ? changed
          ? `Paused "${ch.name}": delivery is held.`
          : `"${ch.name}" was already paused.`
        : changed
          ? `Resumed "${ch.name}": held mail is delivered.`
          : `"${ch.name}" was not paused.`,
      {
        paused: ch.paused,
        changed,
      },
    ),
    wake.length ? [{ type: 'Wake', recipients: wake }] : [],
    undefined,
    changed,
  );
}

/** Removes a member from one channel: its pending mail there is rejected, its clock folded, its
 *  row deleted (member machine REMOVE). Host sessions are never touched. */
function removeMember(state: State, ch: Channel, target: Member, now: number) {
  const q = state.queues[target.session_id] ?? [];
  const keep: string[] = [];
  for (const id of q) {
    const e = state.messages[id];
    if (e?.channel_id === ch.id && e.delivery_status === 'pending') stepEnvelope(e, { type: 'REJECT', now });
    else keep.push(id);
  }
  setQueue(state, target.session_id, keep);
  foldClockOf(ch, target.session_id, now);
  if (stepMember(target, { type: 'REMOVE', now }).removed) ch.members = ch.members.filter((m) => m !== target);
  // A batch still in flight keeps its recipient line (it settles by commit or requeue, and the
  // in-flight guard reads the line's cooldown); otherwise the line goes with the member.
  if (!scanInFlight(state, ch, target.session_id)) delete ch.cooldown_until[target.session_id];
  delete ch.retry_at[target.session_id];
  delete ch.holds[target.session_id];
}

export function disconnect(state: State, sid: string, args: { channel: unknown }, env: Env): Outcome {
  const scoped = memberChannel(state, args.channel, sid);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const { ch, me } = scoped;
  removeMember(state, ch, me, env.now);
  const removed = ch.members.length === 0;
  if (removed) delete state.channels[ch.name];
  const history = enforceRetention(state, env.now);
  return done(
    state,
    ok(
      removed
        ? `Disconnected; "${ch.name}" had no members left and was removed.`
        : `Disconnected from "${ch.name}". No host session was touched.`,
      {
        channel_removed: removed,
        remaining_members: ch.members.length,
      },
    ),
    [],
    history.length ? { history } : undefined,
  );
}

export interface KickArgs {
  channel: unknown;
  target_session_id?: unknown;
  target_role?: unknown;
}

/** Kick (coordinator) or operator removal: one `system` notice to each remaining member. */
export function kick(state: State, caller: string | { operator: true }, args: KickArgs, env: Env): Outcome {
  const operator = typeof caller !== 'string';
  const sid = operator ? OPERATOR_ID : caller;
  let ch: Channel;
  let me: Member | null = null;
  if (operator) {
    const name = typeof args.channel === 'string' ? args.channel.trim().toLowerCase() : '';
    const found = state.channels[name];
    if (found?.lifecycle !== 'active')
      return refused(state, refuse('channel_not_found', `No active channel "${name}".`));
    ch = found;
  } else {
    const scoped = memberChannel(state, args.channel, sid);
    if ('refusal' in scoped) return refused(state, scoped.refusal);
    ({ ch, me } = scoped);
    if (ch.members[0]!.session_id !== sid)
      return refused(
        state,
        refuse('not_coordinator', `Only the coordinator (${ch.members[0]!.role}) may kick. Ask them or the operator.`, {
          coordinator_role: ch.members[0]!.role,
        }),
      );
  }
  const byId = typeof args.target_session_id === 'string' ? args.target_session_id.trim() : '';
  const byRole = typeof args.target_role === 'string' ? args.target_role.trim().toLowerCase() : '';
  if (!byId && !byRole) return refused(state, refuse('target_required', 'Give target_session_id or target_role.'));
  const target =
    ch.members.find((m) => byId && m.session_id === byId) ??
    ch.members.find((m) => byRole && m.role.toLowerCase() === byRole);
  if (me && (byId === sid || target === me))
    return refused(state, refuse('cannot_kick_self', 'You cannot kick yourself; use opencomms_disconnect.'));
  if (!target)
    return refused(
      state,
      refuse('target_not_found', 'No member matches that target.', { members: ch.members.map(memberLabel) }),
    );
  removeMember(state, ch, target, env.now);
  const byLabel = operator ? 'the operator' : memberLabel(me!);
  const notice = `${memberLabel(target)} was removed from channel "${ch.name}" by ${byLabel}.`;
  const recipients: string[] = [];
  for (const m of ch.members) {
    const e: Envelope = {
      message_id: env.mint('ocm'),
      channel_id: ch.id,
      sender_session_id: sid,
      sender_role: operator ? OPERATOR_ROLE : me!.role,
      recipient_session_id: m.session_id,
      recipient_role: m.role,
      message_type: SYSTEM_MESSAGE_TYPE,
      content: notice,
      reply_to: null,
      hop_count: 0,
      correlation_id: env.mint('cor'),
      root_message_id: null,
      ...acceptedEnvelope(env.now),
    };
    state.messages[e.message_id] = e;
    (state.queues[m.session_id] ??= []).push(e.message_id);
    recipients.push(m.session_id);
  }
  const history = enforceRetention(state, env.now);
  const effects: Effect[] = recipients.length ? [{ type: 'Wake', recipients }] : [];
  return done(
    state,
    ok(`Removed ${memberLabel(target)} from "${ch.name}".`, {
      kicked_session_id: target.session_id,
      kicked_role: target.role,
      remaining_session_ids: ch.members.filter((m) => !m.stale).map((m) => m.session_id),
    }),
    effects,
    history.length ? { history } : undefined,
  );
}

/** The host reports the session gone (or back): every membership of it follows. */
export function setStale(
  state: State,
  hostSessionOrId: string,
  stale: boolean,
  env: Env,
  keep: (m: Member) => boolean = () => false,
): Outcome {
  let changed = false;
  for (const ch of Object.values(state.channels)) {
    if (ch.lifecycle !== 'active') continue;
    for (const m of ch.members) {
      if ((m.session_id !== hostSessionOrId && m.host_session_id !== hostSessionOrId) || keep(m)) continue;
      const r = stepMember(m, { type: stale ? 'MARK_STALE' : 'CLEAR_STALE', now: env.now });
      if (r.changed) {
        changed = true;
        if (stale) foldClockOf(ch, m.session_id, env.now);
      }
    }
  }
  return done(
    state,
    ok(changed ? (stale ? 'Marked stale.' : 'Cleared stale.') : 'No change.', { changed }),
    [],
    undefined,
    changed,
  );
}

/** A host session ended (SessionEnd, hosts.md "The hook runner"): its members are marked stale, except a
 *  spawn_push member, whose host session ends after every spawned run and is continued for its next batch:
 *  its end is not the member leaving. */
export const endSession = (state: State, hostSession: string, env: Env): Outcome =>
  setStale(state, hostSession, true, env, (m) => m.delivery_mode === 'spawn_push');

/** This process serves the session (owner-side rule): its memberships name this process. */
export function claim(state: State, session: string, env: Env): Outcome {
  let changed = false;
  for (const ch of Object.values(state.channels))
    for (const m of ch.members)
      if (
        (m.session_id === session || m.host_session_id === session) &&
        (m.owner !== env.by || (env.machine !== undefined && m.machine !== env.machine))
      ) {
        m.owner = env.by;
        if (env.machine !== undefined) m.machine = env.machine;
        changed = true;
      }
  return done(state, ok(changed ? 'Claimed.' : 'Already owned.', { changed }), [], undefined, changed);
}

/**
 * Binds a host session to a member: every row of `member` with this `host` gets `host_session_id`
 * (hooks bind the session they run in; `opencomms bind` binds one by hand). One host session is one
 * member, so rows of other members of the same host that named it lose it.
 */
export function bind(state: State, member: string, host: string, hostSessionId: string): Outcome {
  let rows = 0;
  let changed = false;
  for (const ch of Object.values(state.channels)) {
    if (ch.lifecycle !== 'active') continue;
    for (const m of ch.members) {
      if (m.host !== host) continue;
      if (m.session_id === member) {
        rows++;
        if (m.host_session_id !== hostSessionId) {
          m.host_session_id = hostSessionId;
          changed = true;
        }
      } else if (m.host_session_id === hostSessionId) {
        m.host_session_id = null;
        changed = true;
      }
    }
  }
  if (!rows)
    return refused(
      state,
      refuse(
        'not_member',
        `Member ${member} has no ${host} membership on a live channel. Join a channel from that session first.`,
      ),
    );
  return done(
    state,
    ok(changed ? `Bound ${host} session ${hostSessionId} to member ${member}.` : 'Already bound.', { changed, rows }),
    [],
    undefined,
    changed,
  );
}
