// zod schemas of state v2 (protocol.md "State files", "The state").
// Required fields are the structural rules of protocol.md "Loading (fail-closed)" (a breach = corrupt file); everything else is
// backfilled with its default on load (protocol.md "Loading (fail-closed)"). Objects are loose so additive fields survive.
import * as z from 'zod';
import {
  DEFAULT_MAX_HOPS,
  DEFAULT_MAX_MEMBERS,
  DEFAULT_RATE_LIMIT,
  DEFAULT_WAKES_PER_CHANNEL,
  DEFAULT_WAKES_PER_MEMBER,
  DELIVERY_COOLDOWN_MS,
  MAX_MAX_MEMBERS,
  MIN_MAX_MEMBERS,
  SCHEMA_VERSION,
  STALE_EVENT_MS,
} from './limits.ts';
import { ROLE_RE } from './ids.ts';

export const DELIVERY_STATUSES = ['pending', 'in_flight', 'delivered', 'failed', 'rejected', 'stale'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export const TERMINAL_STATUSES: readonly DeliveryStatus[] = ['delivered', 'failed', 'rejected', 'stale'];

export const DELIVERY_MODES = ['push', 'spawn_push', 'pull', 'poll', 'managed_thread', 'unsupported'] as const;
export type DeliveryMode = (typeof DELIVERY_MODES)[number];

export const CAPABILITY_KEYS = ['push', 'pull', 'resume', 'queue_while_busy', 'interrupt'] as const;
export type Capabilities = Record<(typeof CAPABILITY_KEYS)[number], boolean>;

/** Capabilities derived from the delivery mode. */
export const MODE_CAPABILITIES: Record<DeliveryMode, Capabilities> = {
  push: { push: true, pull: true, resume: false, queue_while_busy: true, interrupt: false },
  spawn_push: { push: true, pull: true, resume: true, queue_while_busy: false, interrupt: false },
  pull: { push: false, pull: true, resume: false, queue_while_busy: true, interrupt: false },
  poll: { push: false, pull: true, resume: false, queue_while_busy: true, interrupt: false },
  managed_thread: { push: true, pull: true, resume: true, queue_while_busy: true, interrupt: false },
  unsupported: { push: false, pull: false, resume: false, queue_while_busy: false, interrupt: false },
};

export type StalePolicy = { mode: 'window'; window_ms: number } | { mode: 'none'; window_ms: null };

/** Push and spawn_push age out after the window; everything else never does (protocol.md "Delivery modes"). */
export function stalePolicyFor(mode: string): StalePolicy {
  return mode === 'push' || mode === 'spawn_push'
    ? { mode: 'window', window_ms: STALE_EVENT_MS }
    : { mode: 'none', window_ms: null };
}

export function capabilitiesFor(mode: string, overrides?: Partial<Capabilities> | null): Capabilities {
  const base = MODE_CAPABILITIES[mode as DeliveryMode] ?? MODE_CAPABILITIES.unsupported;
  return { ...base, ...(overrides ?? {}) };
}

const ms = z.number();
const nullableMs = z.number().nullable();

export const EnvelopeSchema = z.looseObject({
  message_id: z.string(),
  channel_id: z.string(),
  sender_session_id: z.string().default(''),
  sender_role: z.string().default(''),
  recipient_session_id: z.string().default(''),
  recipient_role: z.string().default(''),
  timestamp: ms,
  message_type: z.string().default('manual'),
  content: z.string().default(''),
  reply_to: z.string().nullable().default(null),
  hop_count: z.number().int().default(0),
  correlation_id: z.string().default(''),
  root_message_id: z.string().nullable().default(null),
  delivery_status: z.enum(DELIVERY_STATUSES).default('pending'),
  delivered_at: nullableMs.default(null),
  attempts: z.number().int().default(0),
  delivery_method: z.enum(['push', 'spawn_push', 'pull']).nullable().default(null),
  in_flight_by: z.string().nullable().default(null),
  in_flight_at: nullableMs.default(null),
  /** Additive: part `n` of `of` of a message longer than MAX_PART_SIZE (protocol.md "Parts"); its
   *  content is that slice of the message. Absent on a message sent whole. */
  part: z.object({ n: z.number().int().min(1), of: z.number().int().min(2) }).optional(),
  /** Additive: wakes in a row this message answers (protocol.md "Wakes"); absent = 0. */
  wake_chain: z.number().int().min(0).optional(),
  /** Additive receipt: every machine transition this envelope took, `[event, to, at]`. */
  transitions: z.array(z.tuple([z.string(), z.string(), z.number()])).default([]),
});
export type Envelope = z.infer<typeof EnvelopeSchema>;

const CapabilitiesSchema = z.object({
  push: z.boolean(),
  pull: z.boolean(),
  resume: z.boolean(),
  queue_while_busy: z.boolean(),
  interrupt: z.boolean(),
});

export const MemberSchema = z
  .looseObject({
    session_id: z.string().min(1),
    role: z.string().regex(ROLE_RE),
    role_prompt: z.string(),
    joined_at: ms,
    stale: z.boolean().default(false),
    stale_at: nullableMs.default(null),
    host: z.string(),
    surface: z.string(),
    delivery_mode: z.string(),
    host_session_id: z.string().nullable().default(null),
    /** Additive: the process tag (`"<pid>@<hostname>/<machine id>"`, runtime/process.ts) of the process that serves this push session (owner-side rule);
     *  null or a dead process = ownerless. */
    owner: z.string().nullable().default(null),
    /** Additive: the computer id of the computer that serves this session (src/runtime/machine.ts);
     *  null = recorded before computers had ids, taken as every computer's. */
    machine: z.string().nullable().default(null),
    /** Additive: the checkout the member linked from, a path on its `machine` (engine/lookup.ts
     *  `memberWorktree`); null = recorded before members had one, read as the channel's worktree. */
    worktree: z.string().nullable().default(null),
    capabilities: CapabilitiesSchema.partial().nullable().optional(),
  })
  .transform((m) => ({
    ...m,
    // Derived, never trusted from the file: the mode is the single copy of the truth.
    stale_policy: stalePolicyFor(m.delivery_mode),
    endpoint_capabilities: capabilitiesFor(m.delivery_mode, m.capabilities),
  }));
export type Member = z.infer<typeof MemberSchema>;

export const TimerSchema = z.looseObject({
  active_member_id: z.string().nullable().default(null),
  segment_started_at: nullableMs.default(null),
  elapsed_ms: z.record(z.string(), z.number()).default({}),
  limit_ms: nullableMs.default(null),
  limit_member_id: z.string().nullable().default(null),
});
export type Timer = z.infer<typeof TimerSchema>;
export const emptyTimer = (): Timer => TimerSchema.parse({});

const clampMembers = (n: number) => Math.min(MAX_MAX_MEMBERS, Math.max(MIN_MAX_MEMBERS, Math.floor(n)));

export const WakeLineSchema = z.looseObject({
  at: nullableMs.default(null),
  chain: z.number().int().min(0).default(0),
  base: z.number().int().min(0).default(0),
  starts: z.array(ms).default([]),
  held_by: z.enum(['loop', 'wake_budget']).nullable().default(null),
  held_since: nullableMs.default(null),
  held_newest: nullableMs.default(null),
  ended_by: z.enum(['loop', 'wake_budget']).nullable().default(null),
  ended_since: nullableMs.default(null),
});
export type WakeLine = z.infer<typeof WakeLineSchema>;

export const CountersSchema = z.looseObject({
  wakes: z.number().int().default(0),
  routes: z.record(z.string(), z.number().int()).default({}),
  held: z.number().int().default(0),
  messages: z.number().int().default(0),
  size: z.number().default(0),
});
export type Counters = z.infer<typeof CountersSchema>;

export const UsageSchema = z.looseObject({
  total: CountersSchema.default(() => CountersSchema.parse({})),
  /** Keyed by the bucket's start (ms, USAGE_BUCKET_MS wide). */
  buckets: z.record(z.string(), CountersSchema).default({}),
});
export type Usage = z.infer<typeof UsageSchema>;

export const ChannelSchema = z.looseObject({
  id: z.string(),
  name: z.string(),
  project_id: z.string(),
  worktree: z.string(),
  created_at: ms.default(0),
  paused: z.boolean().default(false),
  paused_at: nullableMs.default(null),
  lifecycle: z.enum(['active', 'saved', 'deleted']).default('active'),
  lifecycle_at: nullableMs.default(null),
  description: z.string().nullable().default(null),
  parent_channel_id: z.string().nullable().default(null),
  members: z.array(MemberSchema).max(MAX_MAX_MEMBERS),
  max_members: z.number().default(DEFAULT_MAX_MEMBERS).transform(clampMembers),
  rate: z.object({ window_start: ms, count: z.number().int() }).default({ window_start: 0, count: 0 }),
  cooldown_until: z.record(z.string(), ms).default({}),
  /** Additive: the one retry after a failed push, per recipient (recipient machine). */
  retry_at: z.record(z.string(), ms).default({}),
  /** Additive: why a recipient's mail is held (recipient machine `blocked`). */
  holds: z.record(z.string(), z.string()).default({}),
  seen_content: z.record(z.string(), ms).default({}),
  /** Additive: each member's wake line (wake machine, protocol.md "Wakes"). */
  wakes: z.record(z.string(), WakeLineSchema).default({}),
  /** Additive: each member's cost ledger (protocol.md "Cost ledger"). */
  usage: z.record(z.string(), UsageSchema).default({}),
  processed_correlations: z.array(z.string()).default([]),
  max_hops: z.number().int().default(DEFAULT_MAX_HOPS),
  rate_limit: z.number().int().default(DEFAULT_RATE_LIMIT),
  delivery_cooldown_ms: z.number().default(DELIVERY_COOLDOWN_MS),
  stale_event_ms: z.number().default(STALE_EVENT_MS),
  timer: TimerSchema.default(emptyTimer),
  budgets: z
    .looseObject({
      max_runtime_ms: nullableMs.default(null),
      max_delivered_messages: nullableMs.default(null),
      max_wakes_per_member: z.number().int().min(0).nullable().default(DEFAULT_WAKES_PER_MEMBER),
      max_wakes_per_channel: z.number().int().min(0).nullable().default(DEFAULT_WAKES_PER_CHANNEL),
    })
    .default({
      max_runtime_ms: null,
      max_delivered_messages: null,
      max_wakes_per_member: DEFAULT_WAKES_PER_MEMBER,
      max_wakes_per_channel: DEFAULT_WAKES_PER_CHANNEL,
    }),
  delivered_total: z.number().int().optional(),
});
export type Channel = z.infer<typeof ChannelSchema> & { delivered_total: number };

export const ErrorEntrySchema = z.looseObject({
  at: ms,
  message: z.string(),
  reason: z.string().optional(),
  channel_id: z.string().optional(),
  session_id: z.string().optional(),
});
export type ErrorEntry = z.infer<typeof ErrorEntrySchema>;

export const StateSchema = z.looseObject({
  schema_version: z.literal(SCHEMA_VERSION),
  channels: z.record(z.string(), ChannelSchema),
  messages: z.record(z.string(), EnvelopeSchema),
  queues: z.record(z.string(), z.array(z.string())),
  delivered_to: z.record(z.string(), z.array(z.string())),
  errors: z.array(ErrorEntrySchema),
});

export interface State {
  schema_version: 2;
  channels: Record<string, Channel>;
  messages: Record<string, Envelope>;
  queues: Record<string, string[]>;
  delivered_to: Record<string, string[]>;
  errors: ErrorEntry[];
}

/** The fields of a live envelope that the mail counts read. */
export type MailFields = Pick<Envelope, 'channel_id' | 'recipient_session_id' | 'delivery_status'>;

/** What the session reads (cards, detail, agent states) show of a state: its channels, and
 *  whether a member has mail queued or in flight on a channel (its agent is Working). Built from
 *  a whole state (engine `sessionsOf`) or from the file store's sessions index. */
export interface SessionsState {
  readonly channels: Readonly<Record<string, Channel>>;
  working(channelId: string, sid: string): boolean;
}

export const emptyState = (): State => ({
  schema_version: SCHEMA_VERSION,
  channels: {},
  messages: {},
  queues: {},
  delivered_to: {},
  errors: [],
});

export type ParseOutcome = { ok: true; state: State } | { ok: false; cause: string };

/** Validate + backfill a parsed schema-2 document. A breach of a structural rule is a corrupt file. */
export function parseState(raw: unknown): ParseOutcome {
  const r = StateSchema.safeParse(raw);
  if (!r.success) {
    const first = r.error.issues[0];
    return { ok: false, cause: `${first?.path.join('.') || '(root)'}: ${first?.message ?? 'invalid'}` };
  }
  const s = r.data;
  for (const [key, ch] of Object.entries(s.channels)) {
    if (ch.name !== key) return { ok: false, cause: `channels.${key}: key does not equal name "${ch.name}"` };
    if (ch.lifecycle !== 'active' && ch.members.length > 0)
      return { ok: false, cause: `channels.${key}: a ${ch.lifecycle} channel has members` };
  }
  // delivered_total backfill (protocol.md "Loading (fail-closed)"): the channel's hand-overs still visible in state.
  const handed: Record<string, number> = {};
  for (const e of Object.values(s.messages))
    if (e.delivery_status === 'delivered' || e.delivery_status === 'in_flight')
      handed[e.channel_id] = (handed[e.channel_id] ?? 0) + 1;
  for (const ch of Object.values(s.channels)) {
    if (ch.delivered_total === undefined) ch.delivered_total = handed[ch.id] ?? 0;
    remapLegacyTimer(ch as Channel);
  }
  return { ok: true, state: s as unknown as State };
}

/** A schema-1 era timer keyed by role (`active_role`, elapsed by role) is remapped to member ids. */
function remapLegacyTimer(ch: Channel) {
  const t = ch.timer as Timer & { active_role?: unknown };
  const byRole = (role: string) => ch.members.find((m) => m.role.toLowerCase() === role.toLowerCase())?.session_id;
  if (typeof t.active_role === 'string') {
    t.active_member_id ??= byRole(t.active_role) ?? null;
    delete t.active_role;
  }
  for (const key of Object.keys(t.elapsed_ms)) {
    const id = ch.members.some((m) => m.session_id === key) ? key : byRole(key);
    if (id && id !== key) {
      t.elapsed_ms[id] = (t.elapsed_ms[id] ?? 0) + t.elapsed_ms[key]!;
      delete t.elapsed_ms[key];
    }
  }
}
