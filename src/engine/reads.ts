// status, inbox, history: reads that change nothing (protocol.md "Result shape", "Drain, commit, requeue, sweep").
import { AnswerRoom, frameContent, headerFieldProblem, UNTRUSTED_NOTICE } from '../framing.ts';
import { DEFAULT_READ_LIMIT, MAX_READ_LIMIT, STATUS_ERRORS_SHOWN } from '../protocol/limits.ts';
import { ok } from '../protocol/result.ts';
import type { Channel, Envelope, Member, State } from '../protocol/schema.ts';
import { readLimit } from './deliver.ts';
import { findMember, liveChannel, normaliseChannelName, memberChannel } from './lookup.ts';
import { answered, refused } from './outcome.ts';
import { mailIndex, type MailIndex } from './deliveries.ts';
import { deliverability } from './receipts.ts';
import { timerStatus } from './timer.ts';
import type { Outcome } from './types.ts';

/** One message as every read result shows it (inbox, history, archive): content framed. */
export const messageView = (e: Envelope) => ({
  message_id: e.message_id,
  sender_role: e.sender_role,
  recipient_role: e.recipient_role,
  message_type: e.message_type,
  content: frameContent(e.content),
  timestamp: e.timestamp,
  reply_to: e.reply_to !== null && headerFieldProblem(e.reply_to) === null ? e.reply_to : null,
  hop_count: e.hop_count,
  delivery_status: e.delivery_status,
  ...(e.part ? { part: e.part } : {}),
});

const envelopesOf = (state: State, ch: Channel) => Object.values(state.messages).filter((e) => e.channel_id === ch.id);

/** One envelope's receipt: its machine state and every transition it took. */
export const receipt = (e: Envelope) => ({
  message_id: e.message_id,
  recipient_role: e.recipient_role,
  delivery_status: e.delivery_status,
  attempts: e.attempts,
  transitions: e.transitions.map(([event, to, at]) => ({ event, to, at })),
});

/** A member as every operator and status view lists it. */
export const memberRow = (m: Member) => ({
  session_id: m.session_id,
  role: m.role,
  host: m.host,
  surface: m.surface,
  delivery_mode: m.delivery_mode,
  stale: m.stale,
});

/** `forAgent`: the session description a member wrote reaches other agents framed as peer text;
 *  the operator (CLI, console) sees it as written. */
export function channelSummary(
  state: State,
  ch: Channel,
  now: number,
  forAgent = false,
  index: MailIndex = mailIndex(state),
) {
  const envs = index.byChannel.get(ch.id) ?? [];
  const pendingOf = (sid: string) => index.count(ch.id, sid).pending;
  return {
    channel_id: ch.id,
    name: ch.name,
    lifecycle: ch.lifecycle,
    paused: ch.paused,
    description: ch.description !== null && forAgent ? frameContent(ch.description) : ch.description,
    parent_channel_id: ch.parent_channel_id,
    coordinator_session_id: ch.members[0]?.session_id ?? null,
    max_members: ch.max_members,
    members: ch.members.map((m) => ({
      ...memberRow(m),
      pending: pendingOf(m.session_id),
      deliverability: deliverability(state, ch, m, now),
    })),
    pending_messages: envs.filter((e) => e.delivery_status === 'pending').length,
    total_messages: envs.length,
    settings: { rate_limit: ch.rate_limit, max_hops: ch.max_hops },
    budgets: { ...ch.budgets, delivered_total: ch.delivered_total },
    timer: timerStatus(ch, now),
    receipts: envs
      .filter((e) => e.delivery_status !== 'delivered' || e.transitions.length > 0)
      .slice(-20)
      .map(receipt),
  };
}

function report(
  state: State,
  channels: Channel[],
  now: number,
  errorVisible: (e: State['errors'][number]) => boolean,
  forAgent: boolean,
) {
  const index = mailIndex(state);
  const summaries = channels.map((c) => channelSummary(state, c, now, forAgent, index));
  return {
    ...(forAgent ? { untrusted_notice: UNTRUSTED_NOTICE } : {}),
    channels: summaries,
    total_messages: summaries.reduce((a, c) => a + c.total_messages, 0),
    pending_messages: summaries.reduce((a, c) => a + c.pending_messages, 0),
    errors: state.errors.filter(errorVisible).slice(-STATUS_ERRORS_SHOWN),
  };
}

/** The data of status and operator_status. */
export type StatusReport = ReturnType<typeof report>;
export type ChannelSummary = ReturnType<typeof channelSummary>;

/** An agent's status: only its own channels and the errors scoped to them or to it. */
export function status(state: State, sid: string, args: { channel?: unknown }, now: number): Outcome {
  let mine = Object.values(state.channels).filter((c) => c.lifecycle === 'active' && findMember(c, sid));
  if (args.channel !== undefined && args.channel !== null && args.channel !== '') {
    const name = normaliseChannelName(args.channel);
    mine = mine.filter((c) => c.name === name);
  }
  const ids = new Set(mine.map((c) => c.id));
  const data = report(
    state,
    mine,
    now,
    (e) => (e.channel_id !== undefined && ids.has(e.channel_id)) || e.session_id === sid,
    true,
  );
  return answered(state, ok(`${data.channels.length} channel(s), ${data.pending_messages} pending.`, data));
}

/** The operator's status: every live channel and every error. */
export function operatorStatus(state: State, now: number): Outcome {
  const live = Object.values(state.channels).filter((c) => c.lifecycle === 'active');
  const data = report(state, live, now, () => true, false);
  return answered(state, ok(`${data.channels.length} channel(s), ${data.pending_messages} pending.`, data));
}

/** The longest prefix of `views` a tool result of `maxSize` shows whole, each entry its JSON. */
function fitting<T>(views: T[], maxSize: number | undefined): { shown: T[]; more: boolean } {
  const room = new AnswerRoom(maxSize);
  const n = views.findIndex((v) => !room.take(JSON.stringify(v)));
  return n < 0 ? { shown: views, more: false } : { shown: views.slice(0, n), more: true };
}

export function inbox(
  state: State,
  sid: string,
  args: { channel: unknown; limit?: unknown },
  maxSize?: number,
): Outcome {
  const scoped = memberChannel(state, args.channel, sid);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const limit = readLimit(args.limit, DEFAULT_READ_LIMIT, MAX_READ_LIMIT);
  const pending = (state.queues[sid] ?? [])
    .map((id) => state.messages[id])
    .filter((e): e is Envelope => !!e && e.channel_id === scoped.ch.id && e.delivery_status === 'pending');
  const { shown: messages, more } = fitting(
    pending.slice(0, limit).map((e) => {
      const { recipient_role: _own, ...view } = messageView(e); // the inbox is the caller's own
      return view;
    }),
    maxSize,
  );
  return answered(
    state,
    ok(
      `${pending.length} pending message(s) on "${scoped.ch.name}" (preview only; nothing consumed).${more ? ` ${messages.length} shown: one answer shows only so much whole; opencomms_pull reads them all, in order.` : ''}`,
      {
        pending: pending.length,
        messages,
        untrusted_notice: UNTRUSTED_NOTICE,
        ...(more ? { more_than_fits: true } : {}),
      },
    ),
  );
}

/** `logged` = the channel's history-log envelopes (newest first), read by the shell. */
export function history(
  state: State,
  who: string | { operator: true },
  args: { channel: unknown; limit?: unknown },
  logged: Envelope[] = [],
  maxSize?: number,
): Outcome {
  // The operator reads any live channel (the CLI's `read`); it takes nobody's mail.
  const scoped = typeof who === 'string' ? memberChannel(state, args.channel, who) : liveChannel(state, args.channel);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const limit = readLimit(args.limit, DEFAULT_READ_LIMIT, MAX_READ_LIMIT);
  const hot = envelopesOf(state, scoped.ch);
  const seen = new Set(hot.map((e) => e.message_id));
  const all = [...hot, ...logged.filter((e) => e.channel_id === scoped.ch.id && !seen.has(e.message_id))].sort(
    (a, b) => b.timestamp - a.timestamp,
  );
  const { shown: messages, more } = fitting(all.slice(0, limit).map(messageView), maxSize);
  return answered(
    state,
    ok(
      `${messages.length} message(s) on "${scoped.ch.name}", newest first.${more ? ' Older ones did not fit what one answer shows whole.' : ''}`,
      {
        ...(more ? { more_than_fits: true } : {}),
        messages,
        untrusted_notice: UNTRUSTED_NOTICE,
      },
    ),
  );
}
