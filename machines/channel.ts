// One channel's lifecycle and the send gates that belong to the channel (FEATURES.md §2.2, §4).
// A refused send is a named guard whose transition emits the `refuse` action with the protocol's
// reason code; the engine reads it from the actions that `transition()` returns.
import { assign, setup } from 'xstate';
import { MAX_SEEN_CONTENT, RATE_WINDOW_MS } from '../src/protocol/limits.ts';

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
  seen_content: Record<string, number>;
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
  /** The late gate of a logical send (after recipients resolve): rate, duplicate, hop. */
  | { type: 'SEND'; now: number; hop: number; content_key: string }
  /** A hand-over of `count` envelopes to a recipient (push drain, pull, hook read). */
  | { type: 'HAND_OVER'; now: number; count: number };

export const channelMachine = setup({
  types: {
    context: {} as ChannelContext,
    events: {} as ChannelEvent,
    input: {} as Omit<ChannelContext, 'paused_at' | 'lifecycle_at' | 'rate' | 'seen_content' | 'delivered_total'>,
  },
  guards: {
    runtimeBudgetExhausted: ({ context, event }) =>
      context.budgets.max_runtime_ms !== null && event.now - context.created_at > context.budgets.max_runtime_ms,
    messageBudgetExhausted: ({ context }) =>
      context.budgets.max_delivered_messages !== null &&
      context.delivered_total >= context.budgets.max_delivered_messages,
    rateLimited: ({ context, event }) =>
      event.now - context.rate.window_start <= RATE_WINDOW_MS && context.rate.count >= context.rate_limit,
    duplicateContent: ({ context, event }) => {
      if (event.type !== 'SEND') return false;
      const seen = context.seen_content[event.content_key];
      return seen !== undefined && event.now - seen < context.stale_event_ms;
    },
    hopLimitExceeded: ({ context, event }) => event.type === 'SEND' && event.hop > context.max_hops,
  },
  actions: {
    /** A marker for the engine; refusing changes nothing. */
    refuse: (_, _params: ChannelRefusal) => {},
    /** Counts the logical send once (a broadcast too) and remembers its content for the
     *  duplicate window, sweeping keys that have expired. */
    recordSend: assign(({ context, event }) => {
      if (event.type !== 'SEND') return {};
      const fresh = event.now - context.rate.window_start > RATE_WINDOW_MS;
      // The newest MAX_SEEN_CONTENT − 1 live keys (insertion order is send order), then this one.
      // A plain loop: building the map through entries/filter/fromEntries cost ~4× as much. A
      // null-prototype object is a hash table from its first key; a `{}` built key by key took a
      // hidden-class transition per key, a new chain on every send (2.5× slower, 16 KB a send).
      const keys = Object.keys(context.seen_content);
      const seen: Record<string, number> = Object.create(null);
      for (let i = Math.max(0, keys.length - (MAX_SEEN_CONTENT - 1)); i < keys.length; i++) {
        const t = context.seen_content[keys[i]!]!;
        if (event.now - t < context.stale_event_ms) seen[keys[i]!] = t;
      }
      delete seen[event.content_key];
      seen[event.content_key] = event.now;
      return {
        rate: fresh ? { window_start: event.now, count: 1 } : { ...context.rate, count: context.rate.count + 1 },
        seen_content: seen,
      };
    }),
    countHandOver: assign(({ context, event }) => ({
      delivered_total: context.delivered_total + (event.type === 'HAND_OVER' ? event.count : 0),
    })),
    markPaused: assign({ paused_at: ({ event }) => event.now}),
    clearPaused: assign({ paused_at: null}),
    markLifecycle: assign({ lifecycle_at: ({ event }) => event.now, paused_at: null}),
  },
}).createMachine({
  id: 'channel',
  initial: 'active',
  context: ({ input }) => ({
    ...input,
    paused_at: null,
    lifecycle_at: null,
    rate: { window_start: 0, count: 0 },
    seen_content: {},
    delivered_total: 0,
  }),
  states: {
    active: {
      on: {
        PAUSE: { target: 'paused', actions: 'markPaused' },
        SAVE: { target: 'saved', actions: 'markLifecycle' },
        DELETE: { target: 'deleted', actions: 'markLifecycle' },
        ADMIT: [
          { guard: 'runtimeBudgetExhausted', actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'runtime' } } },
          { guard: 'messageBudgetExhausted', actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'messages' } } },
        ],
        SEND: [
          { guard: 'rateLimited', actions: { type: 'refuse', params: { reason: 'rate_limited' } } },
          { guard: 'duplicateContent', actions: { type: 'refuse', params: { reason: 'duplicate_content' } } },
          { guard: 'hopLimitExceeded', actions: { type: 'refuse', params: { reason: 'hop_limit_exceeded' } } },
          { actions: 'recordSend' },
        ],
        HAND_OVER: [
          { guard: 'runtimeBudgetExhausted', actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'runtime' } } },
          { guard: 'messageBudgetExhausted', actions: { type: 'refuse', params: { reason: 'budget_exhausted', budget: 'messages' } } },
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
