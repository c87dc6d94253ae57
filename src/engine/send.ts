// send (protocol.md "Check order", "Rules and defaults", "Recipients").
import { hash } from 'node:crypto';
import { splitContent } from '../framing.ts';
import {
  MAX_CONTENT_CHARS,
  MAX_DESCRIPTION_CHARS,
  MAX_PART_SIZE,
  MAX_PROCESSED_CORRELATIONS,
  MESSAGE_TYPES,
  OPERATOR_ID,
  OPERATOR_ROLE,
} from '../protocol/limits.ts';
import { MESSAGE_ID_RE } from '../protocol/ids.ts';
import { applyOps, raw, type Op } from '../protocol/draft.ts';
import { ok, refuse, type Refusal, type ToolResult } from '../protocol/result.ts';
import type { Channel, Envelope, Member, State } from '../protocol/schema.ts';
import { liveChannel, memberChannel } from './lookup.ts';
import { resolveRecipients } from './recipients.ts';
import { done, refused } from './outcome.ts';
import { deliverability } from './receipts.ts';
import { enforceRetention } from './retention.ts';
import { clockOps } from './timer.ts';
import { acceptedEnvelope, channelStepOps } from './transitions.ts';
import { replyChain } from './wakes.ts';
import type { Effect, Env, Outcome } from './types.ts';

export interface SendArgs {
  channel: unknown;
  type?: unknown;
  content: unknown;
  reply_to?: unknown;
  to?: unknown;
  broadcast?: unknown;
  session_description?: unknown;
}

const refusalOf = (r: { reason: string; budget?: string }, ch: Channel): Refusal => {
  switch (r.reason) {
    case 'channel_paused':
      return refuse('channel_paused', `Channel "${ch.name}" is paused. Resume it with opencomms_resume, or wait.`);
    case 'budget_exhausted':
      return refuse(
        'budget_exhausted',
        `The ${r.budget} budget of "${ch.name}" is used up. Pause, ask the operator to raise it, or start a new channel.`,
        { budget: r.budget },
      );
    case 'rate_limited':
      return refuse(
        'rate_limited',
        `"${ch.name}" allows ${ch.rate_limit} sends per minute and they are used up. Retry after the window.`,
        { rate_limit: ch.rate_limit },
      );
    case 'duplicate_content':
      return refuse(
        'duplicate_content',
        'You sent this same content within the last 5 minutes. Do not resend; change the content if it is really new.',
      );
    case 'hop_limit_exceeded':
      return refuse(
        'hop_limit_exceeded',
        `This reply chain would pass ${ch.max_hops} hops. Stop the loop; start a new thread without reply_to only if needed.`,
        { max_hops: ch.max_hops },
      );
    default:
      return refuse('lifecycle_refused', `Channel "${ch.name}" is not active.`);
  }
};

/** One-shot `hash` (Node ≥ 20.12): about half the cost of a Hash object per send. */
export const contentKey = (sender: string, content: string) => `${sender}:${hash('sha256', content).slice(0, 32)}`;

/** A send decided: its writes as operations on the state, its answer and its effects. */
export interface SendPlan {
  ops: Op[];
  result: ToolResult;
  effects: Effect[];
  /** Envelopes it queues (retention looks at the live total). */
  queued: number;
}

/** The send's rules, from a read of the plain state: a refusal, or the writes it makes as
 *  operations. Nothing is written here: `send` applies them to the state it was given; the
 *  runtime's hot path has the store apply and journal them as they are, with no change tracker
 *  between (half of a send's engine step in the server went to the tracker's proxies and diff).
 *  `logged` = the reply's parent read from the history log by the shell, when it left hot state. */
export function planSend(
  state: Readonly<State>,
  who: Sender,
  args: SendArgs,
  env: Env,
  logged?: Envelope,
): SendPlan | { refusal: Refusal } {
  const scoped = senderChannel(state, args.channel, who);
  if ('refusal' in scoped) return scoped;
  const { ch, me } = scoped;
  const sid = me.session_id;
  const admit = channelStepOps(ch, { type: 'ADMIT', now: env.now });
  if (admit.refusal) return { refusal: refusalOf(admit.refusal, ch) };
  const content = args.content;
  if (typeof content !== 'string' || content.trim() === '')
    return { refusal: refuse('content_empty', 'content is blank: send some text.') };
  if (content.length > MAX_CONTENT_CHARS)
    return {
      refusal: refuse(
        'content_too_large',
        `content has ${content.length} chars; the limit is ${MAX_CONTENT_CHARS}. Split or shorten it.`,
        { limit: MAX_CONTENT_CHARS },
      ),
    };
  const type = args.type === undefined || args.type === null ? 'manual' : args.type;
  if (typeof type !== 'string' || !(MESSAGE_TYPES as readonly string[]).includes(type))
    return {
      refusal: refuse(
        'invalid_message_type',
        `type must be one of ${MESSAGE_TYPES.join(', ')}${type === 'system' ? ' ("system" is reserved for OpenComms notices)' : ''}.`,
        { valid_types: [...MESSAGE_TYPES] },
      ),
    };
  const replyTo = args.reply_to === undefined || args.reply_to === null || args.reply_to === '' ? null : args.reply_to;
  // reply_to is written into the frame header of every recipient, outside the markers: only a
  // message id may go there (an unknown but well-formed id still starts a new chain).
  if (replyTo !== null && (typeof replyTo !== 'string' || !MESSAGE_ID_RE.test(replyTo)))
    return {
      refusal: refuse(
        'invalid_argument',
        'reply_to must be the message_id you are answering (ocm_ followed by 32 hex digits), or omitted.',
        { field: 'reply_to' },
      ),
    };
  const recipients = resolveRecipients(ch, me, args.to, args.broadcast === true);
  if (!Array.isArray(recipients)) return { refusal: recipients };

  const parent =
    replyTo === null ? undefined : (state.messages[replyTo] ?? (logged?.message_id === replyTo ? logged : undefined));
  const inChain = parent !== undefined && parent.channel_id === ch.id;
  const hop = inChain ? parent.hop_count + 1 : 0;
  // ADMIT only refuses (test/machines/flat.test.ts), so SEND is stepped from the channel as it is.
  const key = contentKey(sid, content);
  const seen = ch.seen_content;
  const gate = channelStepOps(ch, {
    type: 'SEND',
    now: env.now,
    hop,
    content_key: key,
    seen_at: Object.hasOwn(seen, key) ? seen[key]! : null,
  });
  if (gate.refusal) return { refusal: refusalOf(gate.refusal, ch) };

  const at = ['channels', ch.name];
  const ops: Op[] = gate.ops.map((op) => under(at, op));
  const correlation = inChain ? parent.correlation_id : env.mint('cor');
  const root = inChain ? (parent.root_message_id ?? parent.message_id) : null;
  if (!inChain) {
    // The newest MAX_PROCESSED_CORRELATIONS / 2 are kept once the list passes its cap.
    const list = ch.processed_correlations;
    const n = list.length + 1;
    ops.push(
      n > MAX_PROCESSED_CORRELATIONS
        ? ['s', [...at, 'processed_correlations'], [...list.slice(n - MAX_PROCESSED_CORRELATIONS / 2), correlation]]
        : ['a', [...at, 'processed_correlations'], [correlation]],
    );
  }
  // A message larger than one route can show whole travels as parts (protocol.md "Parts"): one
  // envelope per part and recipient, queued in order, so FIFO hands them over in order.
  const parts = splitContent(content, MAX_PART_SIZE);
  // Wakes in a row this message answers (wakes.ts): the loop guard holds the wake it would cause
  // once the chain is long enough.
  const chain = replyChain(ch, sid, env.now);
  const ids: string[] = [];
  const partIds: string[][] = [];
  for (const r of recipients) {
    const mine: string[] = [];
    parts.forEach((slice, i) => {
      const e: Envelope = {
        message_id: env.mint('ocm'),
        channel_id: ch.id,
        sender_session_id: sid,
        sender_role: me.role,
        recipient_session_id: r.session_id,
        recipient_role: r.role,
        message_type: type,
        content: slice,
        reply_to: replyTo,
        hop_count: hop,
        correlation_id: correlation,
        root_message_id: root,
        ...(parts.length > 1 ? { part: { n: i + 1, of: parts.length } } : {}),
        ...(chain ? { wake_chain: chain } : {}),
        ...acceptedEnvelope(env.now),
      };
      ops.push(['s', ['messages', e.message_id], e]);
      mine.push(e.message_id);
    });
    // A copy: the store may keep the value of a set as the queue itself, and append to it later.
    ops.push(
      state.queues[r.session_id]
        ? ['a', ['queues', r.session_id], [...mine]]
        : ['s', ['queues', r.session_id], [...mine]],
    );
    ids.push(mine[0]!);
    partIds.push(mine);
  }
  for (const op of clockOps(ch, env.now, recipients[0]!.session_id)) ops.push(under(at, op));
  const description = describe(ch, args.session_description);
  if (description) ops.push(['s', [...at, 'description'], description]);
  const data = {
    message_ids: ids,
    recipients: recipients.map((r) => ({
      session_id: r.session_id,
      role: r.role,
      delivery_mode: r.delivery_mode,
      // The send's writes change none of what this reads (pause, staleness, cooldown, mail in flight).
      deliverability: deliverability(state, ch, r, env.now),
    })),
    delivery_status: 'pending' as const,
    correlation_id: correlation,
    hop_count: hop,
    ...(parts.length > 1 ? { parts: parts.length, part_message_ids: partIds } : {}),
    ...(description ? { session_description: description } : {}),
  };
  const names = recipients.map((r) => r.role).join(', ');
  return {
    ops,
    result: ok(
      `Queued ${ids.length} envelope${ids.length === 1 ? '' : 's'} for ${names} on "${ch.name}" (hop ${hop})` +
        `${parts.length > 1 ? `, each in ${parts.length} parts` : ''}.`,
      data,
    ) as ToolResult,
    effects: [{ type: 'Wake', recipients: recipients.map((r) => r.session_id) }],
    queued: ids.length * parts.length,
  };
}

/** Who sends: a member by its session id, or the operator (the CLI, the console), who writes to any
 *  live channel as `Operator` and is bound by every rule of a send but the roster (operator.md
 *  "Speaking to the agents"). */
export type Sender = string | { operator: true };

const OPERATOR: Pick<Member, 'session_id' | 'role'> = { session_id: OPERATOR_ID, role: OPERATOR_ROLE };

function senderChannel(
  state: Readonly<State>,
  raw: unknown,
  who: Sender,
): { ch: Channel; me: Pick<Member, 'session_id' | 'role'> } | { refusal: Refusal } {
  if (typeof who === 'string') return memberChannel(state, raw, who);
  const live = liveChannel(state, raw);
  return 'refusal' in live ? live : { ch: live.ch, me: OPERATOR };
}

const under = (at: readonly string[], op: Op): Op =>
  op[0] === 'd'
    ? ['d', [...at, ...op[1]]]
    : op[0] === 's'
      ? ['s', [...at, ...op[1]], op[2]]
      : ['a', [...at, ...op[1]], op[2]];

export function send(state: State, who: Sender, args: SendArgs, env: Env, logged?: Envelope): Outcome {
  const plan = planSend(raw(state), who, args, env, logged);
  if ('refusal' in plan) return refused(state, plan.refusal);
  applyOps(state, plan.ops);
  const history = enforceRetention(state, env.now, []); // a send makes no envelope terminal
  return done(state, plan.result, plan.effects, history.length ? { history } : undefined);
}

/** Only the first non-blank description is kept; a bad one never refuses the send (protocol.md "Rules and defaults"). */
function describe(ch: Channel, raw: unknown): string | null {
  if (ch.description !== null || typeof raw !== 'string') return null;
  const text = raw.replace(/\s+/g, ' ').trim().slice(0, MAX_DESCRIPTION_CHARS);
  return text || null;
}
