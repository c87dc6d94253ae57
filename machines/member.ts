// One membership (protocol.md "The state"): linked while the host session is alive, stale once the host
// reports it gone, removed on disconnect or kick. The state value maps to `member.stale`.
import { assign, setup } from 'xstate';

export interface MemberContext {
  stale_at: number | null;
}

export type MemberEvent =
  | { type: 'MARK_STALE'; now: number }
  | { type: 'CLEAR_STALE'; now: number }
  | { type: 'REMOVE'; now: number };

export const memberMachine = setup({
  types: { context: {} as MemberContext, events: {} as MemberEvent },
  actions: {
    markStale: assign({ stale_at: ({ event }) => event.now }),
    clearStale: assign({ stale_at: null }),
  },
}).createMachine({
  id: 'member',
  initial: 'linked',
  context: { stale_at: null },
  states: {
    linked: {
      on: {
        MARK_STALE: { target: 'stale', actions: 'markStale' },
        REMOVE: { target: 'removed' },
      },
    },
    stale: {
      on: {
        CLEAR_STALE: { target: 'linked', actions: 'clearStale' },
        REMOVE: { target: 'removed' },
      },
    },
    removed: { type: 'final' },
  },
});
