// One member's wake line on one channel (protocol.md "Wakes"): whether OpenComms may start a turn of
// the member's host session for the mail waiting for it. A wake is a cost the user pays; delivery is
// not: a held wake keeps its mail pending, readable and handed over at the member's next turn that a
// person or the model starts. Pure: the engine passes each wake's chain, budgets and clock.
//   quiet   no wake of OpenComms is being answered;
//   woken   a wake started a turn at `at`: a message the member sends within REFLEX_MS answers it;
//   held    the loop guard (the wake chain reached LOOP_WAKES) or a wake budget holds further wakes.
import { assign, setup } from 'xstate';
import { LOOP_WAKES } from '../src/protocol/limits.ts';

export type WakeHold = 'loop' | 'wake_budget';

export interface WakeContext {
  /** When the last wake started a turn; null when none is being answered. */
  at: number | null;
  /** That wake's chain: the lowest wake chain of the mail it handed over. */
  chain: number;
  /** Where the loop count starts: raised to the held mail's chain by a release. */
  base: number;
  /** Wakes started within the budget window, oldest first. */
  starts: number[];
  held_by: WakeHold | null;
  held_since: number | null;
  /** The newest held envelope's time: a hold counts one held turn per newer mail. */
  held_newest: number | null;
  /** The hold the last wake ended, and since when it held: that wake's batch carries its notice. */
  ended_by: WakeHold | null;
  ended_since: number | null;
}

export type WakeEvent =
  /** A route would start a turn now for mail whose lowest wake chain is `chain`. `channel_starts`:
   *  wakes the channel's members were given within `window_ms`; `keep`: how many starts the
   *  budgets need remembered. */
  | {
      type: 'WAKE';
      now: number;
      chain: number;
      newest: number;
      member_budget: number | null;
      channel_budget: number | null;
      channel_starts: number;
      window_ms: number;
      keep: number;
    }
  /** Held mail was handed over at a turn OpenComms did not start (a pull, a hook's boundary). */
  | { type: 'HANDED'; now: number }
  /** The operator let a loop's wakes go: `chain` (its held mail's) becomes the loop count's base
   *  of every member of the channel, held or not. */
  | { type: 'RELEASE'; now: number; chain: number };

/** Starts still inside the window at `now`. */
export const recentStarts = (starts: readonly number[], now: number, windowMs: number) =>
  starts.filter((s) => now - s < windowMs);

export const wakeMachine = setup({
  types: { context: {} as WakeContext, events: {} as WakeEvent },
  guards: {
    isLoop: ({ context, event }) => event.type === 'WAKE' && event.chain - context.base >= LOOP_WAKES,
    memberBudgetSpent: ({ context, event }) =>
      event.type === 'WAKE' &&
      event.member_budget !== null &&
      recentStarts(context.starts, event.now, event.window_ms).length >= event.member_budget,
    channelBudgetSpent: ({ event }) =>
      event.type === 'WAKE' && event.channel_budget !== null && event.channel_starts >= event.channel_budget,
  },
  actions: {
    holdForLoop: assign(({ context, event }) => ({
      held_by: 'loop' as const,
      held_since: context.held_since ?? event.now,
      held_newest: event.type === 'WAKE' ? event.newest : context.held_newest,
    })),
    holdForBudget: assign(({ context, event }) => ({
      held_by: 'wake_budget' as const,
      held_since: context.held_since ?? event.now,
      held_newest: event.type === 'WAKE' ? event.newest : context.held_newest,
    })),
    recordWake: assign(({ context, event }) => {
      if (event.type !== 'WAKE') return {};
      const starts = [...recentStarts(context.starts, event.now, event.window_ms), event.now];
      return {
        at: event.now,
        chain: event.chain,
        starts: starts.slice(Math.max(0, starts.length - event.keep)),
        held_by: null,
        held_since: null,
        held_newest: null,
        ended_by: context.held_by,
        ended_since: context.held_since,
      };
    }),
    settle: assign({ at: null, held_by: null, held_since: null, held_newest: null }),
    /** The loop count starts again at the held mail: the next wake decides (and the hand-over it
     *  starts carries the hold's notice). A budget still spent keeps holding. */
    release: assign(({ context, event }) => ({
      base: event.type === 'RELEASE' ? Math.max(context.base, event.chain) : context.base,
    })),
  },
}).createMachine({
  id: 'wake',
  initial: 'quiet',
  context: {
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
  states: {
    quiet: {
      on: {
        WAKE: [
          { guard: 'isLoop', target: 'held', actions: 'holdForLoop' },
          { guard: 'memberBudgetSpent', target: 'held', actions: 'holdForBudget' },
          { guard: 'channelBudgetSpent', target: 'held', actions: 'holdForBudget' },
          { target: 'woken', actions: 'recordWake' },
        ],
        RELEASE: { actions: 'release' },
      },
    },
    woken: {
      on: {
        WAKE: [
          { guard: 'isLoop', target: 'held', actions: 'holdForLoop' },
          { guard: 'memberBudgetSpent', target: 'held', actions: 'holdForBudget' },
          { guard: 'channelBudgetSpent', target: 'held', actions: 'holdForBudget' },
          { target: 'woken', actions: 'recordWake' },
        ],
        RELEASE: { actions: 'release' },
      },
    },
    held: {
      on: {
        WAKE: [
          { guard: 'isLoop', actions: 'holdForLoop' },
          { guard: 'memberBudgetSpent', actions: 'holdForBudget' },
          { guard: 'channelBudgetSpent', actions: 'holdForBudget' },
          { target: 'woken', actions: 'recordWake' },
        ],
        HANDED: { target: 'quiet', actions: 'settle' },
        RELEASE: { actions: 'release' },
      },
    },
  },
});
