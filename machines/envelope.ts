// One envelope's delivery: the state value IS the protocol's `delivery_status` (protocol.md
// "The machines", "Drain, commit, requeue, sweep"). Pure: no clock, no I/O; every event carries `now`.
import { assign, setup } from 'xstate';
import { MAX_DELIVERY_ATTEMPTS } from '../src/protocol/limits.ts';

export type DeliveryMethod = 'push' | 'spawn_push' | 'pull';

/** The envelope's own protocol fields that the machine reads and writes. */
export interface EnvelopeContext {
  timestamp: number;
  attempts: number;
  delivered_at: number | null;
  delivery_method: DeliveryMethod | null;
  in_flight_by: string | null;
  in_flight_at: number | null;
}

/** `window_ms` is the recipient's stale window (null = the member never ages out). */
export type EnvelopeEvent =
  | { type: 'DRAIN'; now: number; by: string; window_ms: number | null }
  | { type: 'PULL'; now: number; method: 'pull' | 'push'; window_ms: number | null }
  | { type: 'COMMIT'; now: number; method: DeliveryMethod }
  | { type: 'REQUEUE'; now: number }
  | { type: 'SWEEP'; now: number }
  | { type: 'TICK'; now: number; window_ms: number | null }
  | { type: 'REJECT'; now: number };

export const envelopeMachine = setup({
  types: {
    context: {} as EnvelopeContext,
    events: {} as EnvelopeEvent,
    input: {} as { timestamp: number },
  },
  guards: {
    isPastStaleWindow: ({ context, event }) =>
      'window_ms' in event && event.window_ms !== null && event.now - context.timestamp > event.window_ms,
    attemptsExhausted: ({ context }) => context.attempts >= MAX_DELIVERY_ATTEMPTS,
  },
  actions: {
    markInFlight: assign(({ context, event }) => ({
      attempts: context.attempts + 1,
      in_flight_by: event.type === 'DRAIN' ? event.by : null,
      in_flight_at: event.now,
    })),
    markDelivered: assign(({ event }) => ({
      delivered_at: event.now,
      delivery_method: event.type === 'COMMIT' || event.type === 'PULL' ? event.method : null,
      in_flight_by: null,
      in_flight_at: null,
    })),
    countPull: assign(({ context }) => ({ attempts: context.attempts + 1 })),
    clearInFlight: assign({ in_flight_by: null, in_flight_at: null }),
  },
}).createMachine({
  id: 'envelope',
  initial: 'pending',
  context: ({ input }) => ({
    timestamp: input.timestamp,
    attempts: 0,
    delivered_at: null,
    delivery_method: null,
    in_flight_by: null,
    in_flight_at: null,
  }),
  states: {
    pending: {
      on: {
        DRAIN: [
          { guard: 'isPastStaleWindow', target: 'stale' },
          { target: 'in_flight', actions: 'markInFlight' },
        ],
        PULL: [
          { guard: 'isPastStaleWindow', target: 'stale' },
          { target: 'delivered', actions: ['countPull', 'markDelivered'] },
        ],
        TICK: { guard: 'isPastStaleWindow', target: 'stale' },
        REJECT: { target: 'rejected' },
      },
    },
    in_flight: {
      on: {
        COMMIT: { target: 'delivered', actions: 'markDelivered' },
        REQUEUE: [
          { guard: 'attemptsExhausted', target: 'failed', actions: 'clearInFlight' },
          { target: 'pending', actions: 'clearInFlight' },
        ],
        SWEEP: [
          { guard: 'attemptsExhausted', target: 'failed', actions: 'clearInFlight' },
          { target: 'pending', actions: 'clearInFlight' },
        ],
      },
    },
    delivered: { type: 'final' },
    failed: { type: 'final' },
    rejected: { type: 'final' },
    stale: { type: 'final' },
  },
});
