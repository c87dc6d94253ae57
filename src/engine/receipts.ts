// Receipts: what a sender is told about each recipient right now, from the recipient machine.
import { raw } from '../protocol/draft.ts';
import type { Channel, Member, State } from '../protocol/schema.ts';
import { recipientLine } from './transitions.ts';

export type Deliverability = 'ready' | 'cooling' | 'busy' | 'paused' | 'stale' | 'pull — waits for a read';

/** Read-only scan of every live envelope: over the plain objects (`raw`), so a mutation's draft
 *  does not wrap each envelope it passes. */
export const hasInFlight = (state: State, ch: Channel, rid: string) => {
  const id = ch.id;
  for (const e of Object.values(raw(state.messages)))
    if (e.delivery_status === 'in_flight' && e.recipient_session_id === rid && e.channel_id === id) return true;
  return false;
};

export function deliverability(state: State, ch: Channel, m: Member, now: number): Deliverability {
  if (ch.paused) return 'paused';
  if (m.stale) return 'stale';
  if (!m.endpoint_capabilities.push) return 'pull — waits for a read';
  const line = recipientLine(ch, m.session_id, hasInFlight(state, ch, m.session_id));
  if (line === 'delivering') return 'busy';
  const due = Math.max(ch.cooldown_until[m.session_id] ?? 0, ch.retry_at[m.session_id] ?? 0);
  return due > now ? 'cooling' : 'ready';
}
