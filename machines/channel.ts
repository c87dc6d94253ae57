// One channel's lifecycle and the send gates that belong to the channel (protocol.md "The state", "Rules and defaults").
// A refused send is a named guard whose transition emits the `refuse` action with the protocol's
// reason code; the engine reads it from the actions that `transition()` returns.
import { assign, setup } from 'xstate';
import { RATE_WINDOW_MS } from '../src/protocol/limits.ts';

export type ChannelRefusal =
  | { reason: 'channel_paused' }
  | { reason: 'lifecycle_refused' }
  | { reason: 'budget_exhausted'; budget: 'runtime' | 'messages' }
  | { reason: 'rate_limited' }
  | { reason: 'duplicate_content' }
  | { reason: 'hop_limit_exceeded' };

export interface ChannelContext {
  created_at: number;
  paused_at: number | null;
  lifecycle_at: number | null;
  rate: { window_start: number; count: number };
  rate_limit: number;
  max_hops: number;
  stale_event_ms: number;
  budgets: { max_runtime_ms: number | null; max_delivered_messages: number | null };
  delivered_total: number;
}

export type ChannelEvent =
  | { type: 'PAUSE'; now: number }
  | { type: 'RESUME'; now: number }
  | { type: 'SAVE'; now: number }
  | { type: 'DELETE'; now: number }
  /** The early gate of a send: paused and budgets come before content checks. */
  | { type: 'ADMIT'; now: number }
  /** The late gate of a logical send (after recipients resolve): rate, duplicate, hop.
   *  `seen_at`: when the channel's duplicate window last recorded `content_key`, or null. */
  | { type: 'SEND'; now: number; hop: number; content_key: string; seen_at: number | null }
  /** A hand-over of `count` envelopes to a recipient (push drain, pull, hook read). */
  | { type: 'HAND_OVER'; now: number; count: number };

export const channelMachine = setup({
  types: {
    context: {} as ChannelContext,
    events: {} as ChannelEvent,
    input: {} as Omit<ChannelContext, 'paused_at' | 'lifecycle_at' | 'rate' | 'delivered_total'>,
  },
  guards: {
    runtimeBudgetExhausted: ({ context, event }) =>
      context.budgets.max_runtime_ms !== null && event.now - context.created_at > context.budgets.max_runtime_ms,
    messageBudgetExhausted: ({ context }) =>
      context.budgets.max_delivered_messages !== null &&
      context.delivered_total >= context.budgets.max_delivered_messages,
    rateLimited: ({ context, event }) =>
      event.now - context.rate.window_start <= RATE_WINDOW_MS && context.rate.count >= context.rate_limit,
    duplicateContent: ({ context, event }) =>
      event.type === 'SEND' && event.seen_at !== null && event.now - event.seen_at < context.stale_event_ms,
    hopLimitExceeded: ({ context, event }) => event.type === 'SEND' && event.hop > context.max_hops,
  },
  actions: {
    /** A marker for the engine; refusing changes nothing. */
    refuse: (_, _params: ChannelRefusal) => {},
    /** Records `content_key` at `now` in the channel's duplicate window. The window is a map of
     *  up to 100 keys stored with the channel, and the engine writes it entry by entry
     *  (transitions.ts): as context, every send copied it whole and the change tracker diffed
     *  the copy back to the one key that changed. */
    rememberContent: () => {},
    /** Counts the logical send once (a broadcast too). */
    recordSend: assign(({ context, event }) => {
      if (event.type !== 'SEND') return {};
      const fresh = event.now - context.rate.window_start > RATE_WINDOW_MS;
      return {
        rate: fresh ? { window_start: event.now, count: 1 } : { ...context.rate, count: context.rate.count + 1 },
      };
    }),
    countHandOver: assign(({ context, event }) => ({
      delivered_total: context.delivered_total + (event.type === 'HAND_OVER' ? event.count : 0),
    })),
    markPaused: assign({ paused_at: ({ event }) => event.now }),
    clearPaused: assign({ paused_at: null }),
    markLifecycle: assign({ lifecycle_at: ({ event }) => event.now, paused_at: null }),
  },
}).createMachine({
  id: 'channel',
  initial: 'active',
  context: ({ input }) => ({
    ...input,
    paused_at: null,
    lifecycle_at: null,
    rate: { window_start: 0, count: 0 },
    delivered_total: 0,
  }),
  states: {
    active: {
      on: {
        PAUSE: { target: 'paused', actions: 'markPaused' },
        SAVE: { target: 'saved', actions: 'markLifecycle' },
        DELETE: { target: 'deleted', actions: 'markLifecycle' },
        ADMIT: [
          {
            guard: 'runtimeBudgetExhausted',
            actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'runtime' } },
          },
          {
            guard: 'messageBudgetExhausted',
            actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'messages' } },
          },
        ],
        SEND: [
          { guard: 'rateLimited', actions: { type: 'refuse', params: { reason: 'rate_limited' } } },
          { guard: 'duplicateContent', actions: { type: 'refuse', params: { reason: 'duplicate_content' } } },
          { guard: 'hopLimitExceeded', actions: { type: 'refuse', params: { reason: 'hop_limit_exceeded' } } },
          { actions: ['recordSend', 'rememberContent'] },
        ],
        HAND_OVER: [
          {
            guard: 'runtimeBudgetExhausted',
            actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'runtime' } },
          },
          {
            guard: 'messageBudgetExhausted',
            actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'messages' } },
          },
          { actions: 'countHandOver' },
        ],
      },
    },
    paused: {
      on: {
        RESUME: { target: 'active', actions: 'clearPaused' },
        SAVE: { target: 'saved', actions: 'markLifecycle' },
        DELETE: { target: 'deleted', actions: 'markLifecycle' },
        ADMIT: { actions: { type: 'refuse', params: { reason: 'channel_paused' } } },
        SEND: { actions: { type: 'refuse', params: { reason: 'channel_paused' } } },
        HAND_OVER: { actions: { type: 'refuse', params: { reason: 'channel_paused' } } },
      },
    },
    saved: {
      on: {
        DELETE: { target: 'deleted', actions: 'markLifecycle' },
        ADMIT: { actions: { type: 'refuse', params: { reason: 'lifecycle_refused' } } },
      },
    },
    deleted: { type: 'final' },
  },
});
