// Event alphabets for the generated path tests: each guard of each machine gets both outcomes
// (a `now` before and after every deadline, a hold and no hold, a fresh and a repeated key).
import type { AnyStateMachine, EventFromLogic } from 'xstate';
import {
  MACHINES,
  type ChannelEvent,
  type EnvelopeEvent,
  type MachineName,
  type MemberEvent,
  type RecipientEvent,
  type WakeEvent,
} from '../../machines/index.ts';

export interface Alphabet {
  /** The record a fresh instance starts from (the persisted form). */
  initial: unknown;
  events: EventFromLogic<AnyStateMachine>[];
  /** What makes two states one for the simple paths, where the whole context makes too many (the
   *  wake line: its state, hold, loop base, starts kept and the hold its last wake ended). */
  identity?: (value: unknown, context: Record<string, unknown>) => string;
}

const WINDOW = 1000; // a short stale window so both sides of it are a few ms apart
const envelopeEvents: EnvelopeEvent[] = [
  { type: 'DRAIN', now: 10, by: 'p1@host', window_ms: WINDOW },
  { type: 'DRAIN', now: 5000, by: 'p1@host', window_ms: WINDOW },
  { type: 'PULL', now: 10, method: 'pull', window_ms: null },
  { type: 'PULL', now: 5000, method: 'push', window_ms: WINDOW },
  { type: 'COMMIT', now: 20, method: 'push' },
  { type: 'REQUEUE', now: 30 },
  { type: 'SWEEP', now: 30 },
  { type: 'TICK', now: 10, window_ms: WINDOW },
  { type: 'TICK', now: 5000, window_ms: WINDOW },
  { type: 'REJECT', now: 10 },
];

const recipientEvents: RecipientEvent[] = [
  { type: 'DRAIN', now: 0, hold: null },
  { type: 'DRAIN', now: 0, hold: 'paused' },
  { type: 'DRAIN', now: 5000, hold: null },
  { type: 'TICK', now: 500, hold: null },
  { type: 'TICK', now: 5000, hold: null },
  { type: 'TICK', now: 500, hold: 'busy' },
  { type: 'COMMIT', now: 100 },
  { type: 'REQUEUE', now: 100 },
  { type: 'SWEEP', now: 100 },
];

// rate_limit 1 and a 100 s duplicate window: a second send in the same window is rate limited,
// a key the window saw 80 s before (the engine reads `seen_at` from the channel's stored window)
// is a duplicate in the next rate window, hop 5 passes the cap of 4.
const channelEvents: ChannelEvent[] = [
  { type: 'PAUSE', now: 1 },
  { type: 'RESUME', now: 2 },
  { type: 'SAVE', now: 3 },
  { type: 'DELETE', now: 4 },
  { type: 'ADMIT', now: 10 },
  { type: 'ADMIT', now: 200_000 },
  { type: 'SEND', now: 10, hop: 0, content_key: 'a', seen_at: null },
  { type: 'SEND', now: 10, hop: 5, content_key: 'b', seen_at: null },
  { type: 'SEND', now: 80_000, hop: 0, content_key: 'a', seen_at: 10 },
  { type: 'HAND_OVER', now: 10, count: 1 },
  { type: 'HAND_OVER', now: 200_000, count: 1 },
];

const memberEvents: MemberEvent[] = [
  { type: 'MARK_STALE', now: 7 },
  { type: 'CLEAR_STALE', now: 8 },
  { type: 'REMOVE', now: 9 },
];

// One clock reading, so timestamps never make two states of one: a budget of two wakes per window
// (a third is held), a channel budget spent by others, chain 6 at the loop guard from base 0, and a
// release that raises the base to it.
const wake = (chain: number, channel_starts = 0): WakeEvent => ({
  type: 'WAKE',
  now: 10,
  chain,
  newest: 10,
  member_budget: 2,
  channel_budget: 2,
  channel_starts,
  window_ms: 3_600_000,
  keep: 2,
});
const wakeEvents: WakeEvent[] = [
  wake(0),
  wake(6),
  wake(0, 2),
  { type: 'HANDED', now: 10 },
  { type: 'RELEASE', now: 10, chain: 6 },
];

export const ALPHABETS: Record<MachineName, Alphabet> = {
  envelope: {
    initial: {
      delivery_status: 'pending',
      timestamp: 0,
      attempts: 0,
      delivered_at: null,
      delivery_method: null,
      in_flight_by: null,
      in_flight_at: null,
    },
    events: envelopeEvents,
  },
  recipient: {
    initial: { in_flight: false, cooldown_until: null, retry_at: null, held_by: null, cooldown_ms: 1000 },
    events: recipientEvents,
  },
  channel: {
    initial: {
      lifecycle: 'active',
      paused: false,
      created_at: 0,
      paused_at: null,
      lifecycle_at: null,
      rate: { window_start: 0, count: 0 },
      rate_limit: 1,
      max_hops: 4,
      stale_event_ms: 100_000,
      budgets: { max_runtime_ms: 100_000, max_delivered_messages: 1 },
      delivered_total: 0,
    },
    events: channelEvents,
  },
  member: { initial: { stale: false, stale_at: null, removed: false }, events: memberEvents },
  wake: {
    initial: {
      at: null,
      chain: 0,
      base: 0,
      starts: [],
      held_by: null,
      held_since: null,
      held_newest: null,
      ended_by: null,
      ended_since: null,
    },
    events: wakeEvents,
    identity: (value, c) =>
      JSON.stringify([value, c.held_by, c.base, (c.starts as number[]).length, c.ended_by !== null]),
  },
};

export const machineOf = (name: MachineName) => MACHINES[name].machine as AnyStateMachine;
