// The registry of machines and their protocol-field mappings: the engine, the tests and the
// diagram generator all read the machines from here.
import { channelMachine, type ChannelContext } from './channel.ts';
import { envelopeMachine, type EnvelopeContext } from './envelope.ts';
import { memberMachine } from './member.ts';
import { definePersistence } from './persist.ts';
import { recipientMachine, type Hold } from './recipient.ts';
import { wakeMachine, type WakeContext } from './wake.ts';

export * from './channel.ts';
export * from './envelope.ts';
export * from './member.ts';
export * from './recipient.ts';
export * from './wake.ts';
export { step, toSnapshot, type MachineState, type Persistence, type Step } from './persist.ts';

export type EnvelopeStatus = 'pending' | 'in_flight' | 'delivered' | 'failed' | 'rejected' | 'stale';

/** An envelope's machine-owned fields, exactly as stored in state.json. */
export type EnvelopeRecord = EnvelopeContext & { delivery_status: EnvelopeStatus };

export const envelopePersistence = definePersistence({
  machine: envelopeMachine,
  toState: (r: EnvelopeRecord) => ({
    value: r.delivery_status,
    context: {
      timestamp: r.timestamp,
      attempts: r.attempts,
      delivered_at: r.delivered_at,
      delivery_method: r.delivery_method,
      in_flight_by: r.in_flight_by,
      in_flight_at: r.in_flight_at,
    },
  }),
  toRecord: (s): EnvelopeRecord => ({ delivery_status: s.value as EnvelopeStatus, ...s.context }),
});

/** A recipient's line is stored as the channel's `cooldown_until[rid]`, `retry_at[rid]` and
 *  `holds[rid]`; whether a batch is out is derived from its envelopes (`in_flight`). */
export interface RecipientRecord {
  in_flight: boolean;
  cooldown_until: number | null;
  retry_at: number | null;
  held_by: Hold | null;
  cooldown_ms: number;
}

const recipientValue = (r: RecipientRecord) =>
  r.in_flight
    ? 'delivering'
    : r.held_by !== null
      ? 'blocked'
      : r.cooldown_until !== null || r.retry_at !== null
        ? 'cooling'
        : 'ready';

export const recipientPersistence = definePersistence({
  machine: recipientMachine,
  toState: (r: RecipientRecord) => ({
    value: recipientValue(r),
    context: { cooldown_until: r.cooldown_until, retry_at: r.retry_at, cooldown_ms: r.cooldown_ms, held_by: r.held_by },
  }),
  toRecord: (s): RecipientRecord => ({ in_flight: s.value === 'delivering', ...s.context }),
});

/** The channel's `lifecycle` + `paused` flag and its gate fields. */
export type ChannelRecord = ChannelContext & {
  lifecycle: 'active' | 'saved' | 'deleted';
  paused: boolean;
};

/** The channel context's fields, one by one (the types make a field left out a compile error).
 *  Not rest/spread: the rest of `{ lifecycle, paused, ...context }` is a slow dictionary object,
 *  and a pull steps each channel it takes mail from twice. */
const channelContext = (c: ChannelContext): ChannelContext => ({
  created_at: c.created_at,
  paused_at: c.paused_at,
  lifecycle_at: c.lifecycle_at,
  rate: c.rate,
  rate_limit: c.rate_limit,
  max_hops: c.max_hops,
  stale_event_ms: c.stale_event_ms,
  budgets: c.budgets,
  delivered_total: c.delivered_total,
});

/** A channel's machine record from any object holding its context fields (a stored channel, a
 *  stepped context) and its lifecycle. */
export const channelRecordOf = (
  c: ChannelContext,
  lifecycle: ChannelRecord['lifecycle'],
  paused: boolean,
): ChannelRecord => Object.assign(channelContext(c), { lifecycle, paused });

export const channelPersistence = definePersistence({
  machine: channelMachine,
  toState: (r: ChannelRecord) => ({
    value: r.lifecycle === 'active' ? (r.paused ? 'paused' : 'active') : r.lifecycle,
    context: channelContext(r),
  }),
  toRecord: (s): ChannelRecord => {
    const v = s.value as 'active' | 'paused' | 'saved' | 'deleted';
    return channelRecordOf(s.context, v === 'paused' ? 'active' : v, v === 'paused');
  },
});

/** `member.stale` / `stale_at`; `removed` means the row is deleted. */
export interface MemberRecord {
  stale: boolean;
  stale_at: number | null;
  removed: boolean;
}

export const memberPersistence = definePersistence({
  machine: memberMachine,
  toState: (r: MemberRecord) => ({
    value: r.removed ? 'removed' : r.stale ? 'stale' : 'linked',
    context: { stale_at: r.stale_at },
  }),
  toRecord: (s): MemberRecord => ({
    stale: s.value === 'stale',
    stale_at: s.context.stale_at,
    removed: s.value === 'removed',
  }),
});

/** A member's wake line, stored as the channel's `wakes[rid]`: its context as it is (the state is
 *  derived from it: held when a hold is recorded, woken when a wake is being answered). */
export type WakeRecord = WakeContext;

export const wakePersistence = definePersistence({
  machine: wakeMachine,
  toState: (r: WakeRecord) => ({ value: r.held_by !== null ? 'held' : r.at !== null ? 'woken' : 'quiet', context: r }),
  toRecord: (s): WakeRecord => s.context,
});

export const MACHINES = {
  envelope: envelopePersistence,
  recipient: recipientPersistence,
  channel: channelPersistence,
  member: memberPersistence,
  wake: wakePersistence,
} as const;
export type MachineName = keyof typeof MACHINES;
