// Recipient resolution (protocol.md "Recipients"), shared by send and the timer's `switch`.
import { refuse, type Refusal } from '../protocol/result.ts';
import type { Channel, Member } from '../protocol/schema.ts';
import { memberLabel } from './lookup.ts';

/** How much of a caller's `to` is echoed back in a refusal: a role or id is at most 64 chars. */
const MAX_ECHOED_CHARS = 64;

/** `to` / `broadcast` / the single peer; never a guess on 3+ members. */
export function resolveRecipients(
  ch: Channel,
  me: Pick<Member, 'session_id'>,
  to: unknown,
  broadcast: boolean,
): Member[] | Refusal {
  const others = ch.members.filter((m) => m.session_id !== me.session_id);
  const roster = { members: others.map(memberLabel) };
  if (to !== undefined && to !== null && to !== '' && broadcast)
    return refuse('invalid_argument', 'Give either `to` or `broadcast`, not both.', { field: 'to' });
  if (broadcast) {
    const live = others.filter((m) => !m.stale);
    if (live.length) return live;
    return others.length
      ? refuse(
          'recipient_stale',
          'Every other member is stale (their sessions are gone). Ask the operator to repair the channel, or wait for a peer to rejoin.',
          roster,
        )
      : refuse('no_recipient', 'No other member is on this channel yet. Wait for a peer to join.');
  }
  if (typeof to === 'string' && to.trim() !== '') {
    const key = to.trim();
    const hit =
      others.find((m) => m.session_id === key) ?? others.find((m) => m.role.toLowerCase() === key.toLowerCase());
    if (!hit)
      return refuse(
        'recipient_not_found',
        `No other member matches "${key.slice(0, MAX_ECHOED_CHARS)}". Use one of: ${roster.members.join(', ') || '(none)'}.`,
        roster,
      );
    if (hit.stale)
      return refuse(
        'recipient_stale',
        `${memberLabel(hit)} is stale (its session is gone). Ask the operator to repair the channel, or wait for it to rejoin.`,
        roster,
      );
    return [hit];
  }
  if (others.length === 0)
    return refuse('no_recipient', 'No other member is on this channel yet. Wait for a peer to join.');
  if (others.length > 1)
    return refuse(
      'recipient_ambiguous',
      `${others.length} other members: name one with \`to\` (session id or role) or set broadcast=true.`,
      roster,
    );
  if (others[0]!.stale)
    return refuse(
      'recipient_stale',
      `${memberLabel(others[0]!)} is stale (its session is gone). Ask the operator to repair the channel, or wait for it to rejoin.`,
      roster,
    );
  return [others[0]!];
}
