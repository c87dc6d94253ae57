// One recipient's delivery line on one channel (protocol.md "The machines"): whether a push hand-over may
// start now, must wait for a due time, or is held. Pure: deadlines live in context, events carry `now`.
// Every state is recoverable from the stored fields: a batch in flight → delivering, a hold →
// blocked, a deadline → cooling, nothing → ready.
import { assign, setup } from 'xstate';
import { DELIVERY_RETRY_MS } from '../src/protocol/limits.ts';

/** Why pending mail is held instead of handed over. */
export type Hold = 'paused' | 'budget' | 'busy' | 'not_owner' | 'ineligible' | 'stale' | 'loop' | 'wake_budget';

export interface RecipientContext {
  /** `channel.cooldown_until[rid]`: no new push batch before this time. */
  cooldown_until: number | null;
  /** `channel.retry_at[rid]`: the one retry after a failed hand-over. */
  retry_at: number | null;
  /** `channel.delivery_cooldown_ms`. */
  cooldown_ms: number;
  /** `channel.holds[rid]`: why the last attempt was held. */
  held_by: Hold | null;
}

export type RecipientEvent =
  | { type: 'DRAIN'; now: number; hold: Hold | null }
  | { type: 'TICK'; now: number; hold: Hold | null }
  | { type: 'COMMIT'; now: number }
  | { type: 'REQUEUE'; now: number }
  | { type: 'SWEEP'; now: number };

export const recipientMachine = setup({
  types: {
    context: {} as RecipientContext,
    events: {} as RecipientEvent,
    input: {} as { cooldown_ms: number },
  },
  guards: {
    isHeld: ({ event }) => 'hold' in event && event.hold !== null,
    isCooling: ({ context, event }) => (context.cooldown_until ?? 0) > event.now || (context.retry_at ?? 0) > event.now,
  },
  actions: {
    recordHold: assign({ held_by: ({ event }) => ('hold' in event ? event.hold : null) }),
    clearHold: assign({ held_by: null }),
    /** Only the first envelope of a batch waits: the cooldown starts when a batch leaves. */
    startCooldown: assign(({ context, event }) => ({
      cooldown_until: event.now + context.cooldown_ms,
      retry_at: null,
      held_by: null,
    })),
    clearDeadlines: assign({ cooldown_until: null, retry_at: null, held_by: null }),
    scheduleRetry: assign({ retry_at: ({ event }) => event.now + DELIVERY_RETRY_MS }),
  },
}).createMachine({
  id: 'recipient',
  initial: 'ready',
  context: ({ input }) => ({ cooldown_until: null, retry_at: null, cooldown_ms: input.cooldown_ms, held_by: null }),
  states: {
    ready: {
      on: {
        DRAIN: [
          { guard: 'isHeld', target: 'blocked', actions: 'recordHold' },
          { target: 'delivering', actions: 'startCooldown' },
        ],
      },
    },
    cooling: {
      on: {
        DRAIN: [
          { guard: 'isHeld', target: 'blocked', actions: 'recordHold' },
          { guard: 'isCooling' },
          { target: 'delivering', actions: 'startCooldown' },
        ],
        TICK: [
          { guard: 'isHeld', target: 'blocked', actions: 'recordHold' },
          { guard: 'isCooling' },
          { target: 'ready', actions: 'clearDeadlines' },
        ],
      },
    },
    blocked: {
      on: {
        DRAIN: [
          { guard: 'isHeld', actions: 'recordHold' },
          { guard: 'isCooling', target: 'cooling', actions: 'clearHold' },
          { target: 'delivering', actions: 'startCooldown' },
        ],
        TICK: [
          { guard: 'isHeld', actions: 'recordHold' },
          { guard: 'isCooling', target: 'cooling', actions: 'clearHold' },
          { target: 'ready', actions: 'clearDeadlines' },
        ],
      },
    },
    // The in-flight guard: while a batch is out, no DRAIN or TICK starts another one.
    delivering: {
      on: {
        COMMIT: { target: 'cooling' },
        REQUEUE: { target: 'cooling', actions: 'scheduleRetry' },
        SWEEP: { target: 'cooling' },
      },
    },
  },
});
