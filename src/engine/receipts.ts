// Receipts: what a sender is told about each recipient right now, from the recipient machine.
import { raw } from '../protocol/draft.ts';
import type { Channel, Member, State } from '../protocol/schema.ts';
import { recipientLine } from './transitions.ts';

export type Deliverability = 'ready' | 'cooling' | 'busy' | 'paused' | 'stale' | 'pull — waits for a read';

/** Whether a batch for `rid` on `ch` is in flight. A batch in flight was drained, a drain starts
 *  the recipient's cooldown, and the recipient machine clears it only on a TICK, which it does not
 *  take while delivering: no cooldown, no batch, and no scan (a recipient that is away never
 *  drains, however long its backlog). Otherwise a read-only scan of the live envelopes, over the
 *  plain objects (`raw`), so a mutation's draft does not wrap each envelope it passes. */
export const hasInFlight = (state: Readonly<State>, ch: Channel, rid: string) =>
  raw(ch).cooldown_until[rid] !== undefined && scanInFlight(state, ch, rid);

/** The scan alone, for the one place that must not trust the cooldown (it is about to drop it). */
export function scanInFlight(state: Readonly<State>, ch: Channel, rid: string): boolean {
  const id = ch.id;
  for (const e of Object.values(raw(state.messages)))
    if (e.delivery_status === 'in_flight' && e.recipient_session_id === rid && e.channel_id === id) return true;
  return false;
}

export function deliverability(state: Readonly<State>, ch: Channel, m: Member, now: number): Deliverability {
  if (ch.paused) return 'paused';
  if (m.stale) return 'stale';
  if (!m.endpoint_capabilities.push) return 'pull — waits for a read';
  const line = recipientLine(ch, m.session_id, hasInFlight(state, ch, m.session_id));
  if (line === 'delivering') return 'busy';
  const due = Math.max(ch.cooldown_until[m.session_id] ?? 0, ch.retry_at[m.session_id] ?? 0);
  return due > now ? 'cooling' : 'ready';
}
