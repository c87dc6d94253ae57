// The engine: `(state, command, env) -> { state, result, effects }`. Pure given `env` (now, the
// process tag, an id source); host-neutral. The state passed in is a private draft it may change.
import type { Archive, ArchiveHead } from '../protocol/archive.ts';
import { ok } from '../protocol/result.ts';
import type { Envelope, ErrorEntry, State } from '../protocol/schema.ts';
import { recordError } from './lookup.ts';
import {
  commitDelivery,
  drain,
  pull,
  requeueDelivery,
  sweepInFlight,
  type DrainOptions,
  type PullArgs,
} from './deliver.ts';
import { create, join, type CreateArgs, type JoinArgs } from './link.ts';
import {
  bind,
  claim,
  disconnect,
  endSession,
  kick,
  setPaused,
  setStale,
  updateRole,
  type KickArgs,
} from './membership.ts';
import { answered, done } from './outcome.ts';
import { createSession, deliveries, sessionGet, sessionList, type CreateSessionArgs } from './operator.ts';
import { history, inbox, operatorStatus, status } from './reads.ts';
import { personTurn, releaseWakes, setWakeBudget } from './wake-ops.ts';
import { planSend, send, type SendArgs, type Sender, type SendPlan } from './send.ts';
import { nearCap } from './retention.ts';
import { archiveRead, deleteSession, restore, save, type Actor } from './sessions.ts';
import { timer, type TimerArgs } from './timer.ts';
import type { Caller, Env, Held, OperatorCaller, Outcome } from './types.ts';

type Ch = { channel: unknown };

export type Command =
  | { op: 'create'; caller: Caller; args: CreateArgs }
  | { op: 'create_session'; actor: OperatorCaller; args: CreateSessionArgs }
  | { op: 'join'; caller: Caller; args: JoinArgs; compact_context?: string }
  /** `sid`: a member, or `{ operator: true }` (the CLI's `send`, the console's compose box). */
  | { op: 'send'; sid: Sender; args: SendArgs; parent?: Envelope }
  | { op: 'status'; sid: string; args: { channel?: unknown } }
  | { op: 'operator_status' }
  /** Operator reads; the shell reads archives and history logs into them (runtime `prepare`). */
  | { op: 'session_list'; archives?: readonly ArchiveHead[] }
  | { op: 'session_get'; args: Ch; archive?: Archive | null }
  | { op: 'deliveries'; args: Ch; logged?: Envelope[] }
  | { op: 'inbox'; sid: string; args: Ch & { limit?: unknown }; max_size?: number }
  | {
      op: 'history';
      sid: string | { operator: true };
      args: Ch & { limit?: unknown };
      logged?: Envelope[];
      max_size?: number;
    }
  /** `max_size`: what the route the answer takes shows whole (adapters/route-limits.ts), never a tool argument. */
  | { op: 'pull'; sid: string; args: PullArgs; method?: 'pull' | 'push'; max_size?: number }
  | { op: 'update_role'; sid: string; args: Ch & { role_prompt: unknown } }
  /** `sid`: the member's own tool; `{ operator: true }`: the CLI or the console. */
  | { op: 'pause' | 'resume'; sid: string | { operator: true }; args: Ch }
  | { op: 'disconnect'; sid: string; args: Ch }
  | { op: 'kick'; caller: string | { operator: true }; args: KickArgs }
  | { op: 'timer'; sid: string; args: TimerArgs }
  | {
      op: 'save_session';
      actor: Actor;
      args: Ch & { summary?: unknown };
      logged?: Envelope[];
      loggedIds?: ReadonlySet<string>;
    }
  | { op: 'resume_session'; actor: Actor; args: Ch & { new_name?: unknown }; archive: Archive | null }
  | { op: 'delete_session'; actor: Actor; args: Ch & { confirm?: unknown }; archive: Archive | null }
  /** `archives`: every head, for mode=list; `archive`: the one named, read whole, for summary and messages. */
  | {
      op: 'archive';
      actor: Actor;
      args: { channel?: unknown; mode?: unknown; limit?: unknown };
      archives?: readonly ArchiveHead[];
      archive?: Archive | null;
    }
  | { op: 'drain'; rid: string; opts?: DrainOptions }
  | { op: 'commit'; rid: string; message_ids: string[]; method: 'push' | 'spawn_push'; held: Held }
  | { op: 'requeue'; rid: string; message_ids: string[]; error: string; held: Held }
  | { op: 'sweep'; alive: (by: string) => boolean }
  | { op: 'mark_stale' | 'clear_stale' | 'claim' | 'session_end'; session: string }
  | { op: 'bind'; member: string; host: string; host_session_id: string }
  | { op: 'record_error'; entry: ErrorEntry }
  /** The operator's: wakes a hold keeps (all members, or one by id or role), and live wake budgets. */
  | { op: 'release_wakes'; args: Ch & { member?: unknown } }
  /** A host's report that a person started a turn of `session` (wake-ops.ts personTurn). */
  | { op: 'person_turn'; session: string }
  | { op: 'set_wake_budget'; args: Ch & { max_wakes_per_member?: unknown; max_wakes_per_channel?: unknown } }
  | { op: 'read_state' };

export function apply(state: State, cmd: Command, env: Env): Outcome {
  switch (cmd.op) {
    case 'create':
      return create(state, cmd.caller, cmd.args, env);
    case 'create_session':
      return createSession(state, cmd.actor, cmd.args, env);
    case 'join':
      return join(state, cmd.caller, cmd.args, env, cmd.compact_context);
    case 'send':
      return send(state, cmd.sid, cmd.args, env, cmd.parent);
    case 'status':
      return status(state, cmd.sid, cmd.args, env.now);
    case 'operator_status':
      return operatorStatus(state, env.now);
    case 'session_list':
      return sessionList(state, cmd.archives ?? []);
    case 'session_get':
      return sessionGet(state, cmd.args, cmd.archive ?? null);
    case 'deliveries':
      return deliveries(state, cmd.args, cmd.logged ?? [], env.now);
    case 'inbox':
      return inbox(state, cmd.sid, cmd.args, cmd.max_size);
    case 'history':
      return history(state, cmd.sid, cmd.args, cmd.logged, cmd.max_size);
    case 'pull':
      return pull(state, cmd.sid, cmd.args, env, cmd.method, cmd.max_size);
    case 'update_role':
      return updateRole(state, cmd.sid, cmd.args);
    case 'pause':
      return setPaused(state, cmd.sid, cmd.args, true, env);
    case 'resume':
      return setPaused(state, cmd.sid, cmd.args, false, env);
    case 'disconnect':
      return disconnect(state, cmd.sid, cmd.args, env);
    case 'kick':
      return kick(state, cmd.caller, cmd.args, env);
    case 'timer':
      return timer(state, cmd.sid, cmd.args, env);
    case 'save_session':
      return save(state, cmd.actor, cmd.args, cmd.logged ?? [], env, cmd.loggedIds);
    case 'resume_session':
      return restore(state, cmd.actor, cmd.args, cmd.archive, env);
    case 'delete_session':
      return deleteSession(state, cmd.actor, cmd.args, cmd.archive, env);
    case 'archive':
      return archiveRead(state, cmd.actor, cmd.args, cmd.archives ?? [], cmd.archive ?? null);
    case 'drain':
      return drain(state, cmd.rid, env, cmd.opts);
    case 'commit':
      return commitDelivery(state, cmd.rid, cmd.message_ids, cmd.method, cmd.held, env);
    case 'requeue':
      return requeueDelivery(state, cmd.rid, cmd.message_ids, cmd.error, cmd.held, env);
    case 'sweep':
      return sweepInFlight(state, cmd.alive, env);
    case 'mark_stale':
      return setStale(state, cmd.session, true, env);
    case 'clear_stale':
      return setStale(state, cmd.session, false, env);
    case 'session_end':
      return endSession(state, cmd.session, env);
    case 'claim':
      return claim(state, cmd.session, env);
    case 'bind':
      return bind(state, cmd.member, cmd.host, cmd.host_session_id);
    case 'release_wakes':
      return releaseWakes(state, cmd.args, env);
    case 'set_wake_budget':
      return setWakeBudget(state, cmd.args, env);
    case 'person_turn':
      return personTurn(state, cmd.session, env);
    case 'record_error':
      recordError(state, cmd.entry);
      return done(state, ok('Recorded.'));
    case 'read_state':
      return answered(state, ok('state', {}));
  }
}

/** The hot path's command as planned writes (send.ts), which the store applies and journals
 *  with no change tracker; null for a command with no plan, or a send that retention may have to
 *  trim after (near the cap): those take `apply` on a draft. */
export function plan(
  state: Readonly<State>,
  cmd: Command,
  env: Env,
): Pick<SendPlan, 'ops' | 'result' | 'effects'> | null {
  if (cmd.op !== 'send') return null;
  const p = planSend(state, cmd.sid, cmd.args, env, cmd.parent);
  if ('refusal' in p) return { ops: [], result: p.refusal, effects: [] };
  return nearCap(state, p.queued) ? null : p;
}

export type { Caller, Effect, Env, Held, OperatorCaller, Outcome, Writes } from './types.ts';
export { nextDue, pendingRecipients } from './deliver.ts';
export { compactContext, archiveSummary } from './sessions.ts';
export type { Actor } from './sessions.ts';
