// create and join (protocol.md "Result shape", "Check order").
import {
  DEFAULT_MAX_HOPS,
  DEFAULT_MAX_MEMBERS,
  DEFAULT_RATE_LIMIT,
  DEFAULT_WAKES_PER_CHANNEL,
  DEFAULT_WAKES_PER_MEMBER,
  MAX_BUDGET_MESSAGES,
  MAX_BUDGET_RUNTIME_MS,
  MAX_MAX_HOPS,
  MAX_MAX_MEMBERS,
  MAX_RATE_LIMIT,
  MAX_WAKE_BUDGET,
  MIN_BUDGET_MESSAGES,
  MIN_BUDGET_RUNTIME_MS,
  MIN_MAX_HOPS,
  MIN_MAX_MEMBERS,
  MIN_RATE_LIMIT,
} from '../protocol/limits.ts';
import { ok, refuse, type Refusal } from '../protocol/result.ts';
import {
  capabilitiesFor,
  ChannelSchema,
  stalePolicyFor,
  type Channel,
  type Member,
  type State,
} from '../protocol/schema.ts';
import {
  findMember,
  invalidChannelName,
  invalidRole,
  isSentinelProject,
  liveChannel,
  memberWorktree,
  normaliseChannelName,
  normaliseRole,
  tombstoneRefusal,
} from './lookup.ts';
import type { Caller, Env, Outcome } from './types.ts';
import { done, refused } from './outcome.ts';

export interface CreateArgs {
  channel: unknown;
  role: unknown;
  role_prompt: unknown;
  max_members?: unknown;
  rate_limit?: unknown;
  max_hops?: unknown;
  budget_runtime_ms?: unknown;
  budget_messages?: unknown;
  max_wakes_per_member?: unknown;
  max_wakes_per_channel?: unknown;
}

export function newMember(
  caller: Caller,
  role: string,
  rolePrompt: string,
  now: number,
  by: string | null = null,
  machine: string | null = null,
): Member {
  return {
    session_id: caller.session_id,
    role,
    role_prompt: rolePrompt,
    joined_at: now,
    stale: false,
    stale_at: null,
    host: caller.host,
    surface: caller.surface,
    delivery_mode: caller.delivery_mode,
    host_session_id: caller.host_session_id,
    // The linking process serves a push session; pull members are never prompted.
    owner: caller.delivery_mode === 'push' ? by : null,
    machine,
    worktree: caller.worktree,
    stale_policy: stalePolicyFor(caller.delivery_mode),
    endpoint_capabilities: capabilitiesFor(caller.delivery_mode),
  };
}

/** A fresh active channel with every default (protocol.md "The state"). */
export function newChannel(
  fields: Pick<Channel, 'id' | 'name' | 'project_id' | 'worktree' | 'created_at'> & Partial<Channel>,
): Channel {
  const ch = ChannelSchema.parse({ ...fields, members: [] }) as Channel;
  ch.delivered_total = 0;
  ch.members = fields.members ?? [];
  return ch;
}

/** A new channel of `actor` (its project and worktree), minted now. */
export const channelOf = (
  actor: { project_id: string; worktree: string },
  name: string,
  env: Env,
  fields: Partial<Channel> = {},
): Channel =>
  newChannel({
    id: env.mint('chn'),
    name,
    project_id: actor.project_id,
    worktree: actor.worktree,
    created_at: env.now,
    ...fields,
  });

/** A name a new channel cannot take: held by an active channel, or by a saved one (restore it);
 *  a deleted tombstone's name is free (protocol.md "Timer, kick, saved channels"). */
export function nameTaken(state: State, name: string, next: string): Refusal | null {
  const existing = state.channels[name];
  if (existing?.lifecycle === 'active') return refuse('channel_exists', `Channel "${name}" already exists. ${next}`);
  return existing?.lifecycle === 'saved' ? tombstoneRefusal(existing) : null;
}

export type Clamp = { field: string; raw: unknown; def: number | null; min: number; max: number; nullable?: boolean };

/** Options are floored and clamped; a value that is not a number is refused (`invalid_argument`). */
export function clampOptions(specs: Clamp[]): Record<string, number | null> | Refusal {
  const out: Record<string, number | null> = {};
  for (const s of specs) {
    if (s.raw === undefined || (s.nullable && s.raw === null)) {
      out[s.field] = s.def;
      continue;
    }
    const n =
      typeof s.raw === 'number' ? s.raw : typeof s.raw === 'string' && s.raw.trim() !== '' ? Number(s.raw) : NaN;
    if (!Number.isFinite(n))
      return refuse('invalid_argument', `${s.field} must be a number (${s.min}..${s.max}).`, { field: s.field });
    out[s.field] = Math.min(s.max, Math.max(s.min, Math.floor(n)));
  }
  return out;
}

/** The wake budgets a channel is created or set with (protocol.md "Wakes"): absent = the default,
 *  null = none. */
export const wakeBudgetFields = (args: { max_wakes_per_member?: unknown; max_wakes_per_channel?: unknown }): Clamp[] =>
  (
    [
      ['max_wakes_per_member', DEFAULT_WAKES_PER_MEMBER],
      ['max_wakes_per_channel', DEFAULT_WAKES_PER_CHANNEL],
    ] as const
  ).map(([field, def]) => ({
    field,
    raw: args[field],
    def: args[field] === null ? null : def,
    min: 0,
    max: MAX_WAKE_BUDGET,
    nullable: true,
  }));

const contextMissing = (c: Caller) => !c.session_id || !c.project_id || !c.worktree;

export function create(state: State, caller: Caller, args: CreateArgs, env: Env): Outcome {
  const name = normaliseChannelName(args.channel);
  if (name === null) return refused(state, invalidChannelName());
  if (contextMissing(caller))
    return refused(
      state,
      refuse('context_missing', 'The adapter supplied no session, project or worktree; report an adapter fault.'),
    );
  const prompt = typeof args.role_prompt === 'string' ? args.role_prompt.trim() : '';
  if (!prompt) return refused(state, roleFirstPrompt());
  const role = normaliseRole(args.role);
  if (role === null) return refused(state, invalidRole());
  const opts = clampOptions([
    {
      field: 'max_members',
      raw: args.max_members,
      def: DEFAULT_MAX_MEMBERS,
      min: MIN_MAX_MEMBERS,
      max: MAX_MAX_MEMBERS,
    },
    { field: 'rate_limit', raw: args.rate_limit, def: DEFAULT_RATE_LIMIT, min: MIN_RATE_LIMIT, max: MAX_RATE_LIMIT },
    { field: 'max_hops', raw: args.max_hops, def: DEFAULT_MAX_HOPS, min: MIN_MAX_HOPS, max: MAX_MAX_HOPS },
    {
      field: 'budget_runtime_ms',
      raw: args.budget_runtime_ms,
      def: null,
      min: MIN_BUDGET_RUNTIME_MS,
      max: MAX_BUDGET_RUNTIME_MS,
      nullable: true,
    },
    {
      field: 'budget_messages',
      raw: args.budget_messages,
      def: null,
      min: MIN_BUDGET_MESSAGES,
      max: MAX_BUDGET_MESSAGES,
      nullable: true,
    },
    ...wakeBudgetFields(args),
  ]);
  if ('ok' in opts) return refused(state, opts as Refusal);
  const taken = nameTaken(state, name, 'Join it, or choose another name.');
  if (taken) return refused(state, taken);
  const budgets = {
    max_runtime_ms: opts.budget_runtime_ms ?? null,
    max_delivered_messages: opts.budget_messages ?? null,
    max_wakes_per_member: opts.max_wakes_per_member ?? null,
    max_wakes_per_channel: opts.max_wakes_per_channel ?? null,
  };
  const ch = channelOf(caller, name, env, {
    max_members: opts.max_members!,
    rate_limit: opts.rate_limit!,
    max_hops: opts.max_hops!,
    budgets,
    members: [newMember(caller, role, prompt, env.now, env.by, env.machine ?? null)],
  });
  state.channels[name] = ch;
  return done(
    state,
    ok(`Created channel "${name}" as ${role}. Others join with opencomms_join channel=${name}.`, {
      channel_id: ch.id,
      role,
      session_id: caller.session_id,
      settings: { max_members: ch.max_members, rate_limit: ch.rate_limit, max_hops: ch.max_hops, budgets },
    }),
  );
}

const roleFirstPrompt = () =>
  refuse(
    'role_prompt_required',
    'role_prompt is blank: give standing instructions for your role (what you do in this channel).',
  );

export interface JoinArgs {
  channel: unknown;
  role: unknown;
  role_prompt: unknown;
}

/** `compactContext` is the restored channel's archive digest, read by the shell. */
export function join(state: State, caller: Caller, args: JoinArgs, env: Env, compactContext?: string): Outcome {
  const role = normaliseRole(args.role);
  if (role === null) return refused(state, invalidRole());
  const found = liveChannel(state, args.channel);
  if ('refusal' in found) return refused(state, found.refusal);
  const { ch } = found;
  if (contextMissing(caller))
    return refused(
      state,
      refuse('context_missing', 'The adapter supplied no session, project or worktree; report an adapter fault.'),
    );
  const empty = ch.members.length === 0;
  if (
    !empty &&
    !isSentinelProject(ch.project_id) &&
    !isSentinelProject(caller.project_id) &&
    ch.project_id !== caller.project_id
  )
    return refused(
      state,
      refuse(
        'project_mismatch',
        `Channel "${ch.name}" belongs to another project. Open the right project; never relink across projects.`,
      ),
    );
  // A worktree is a path on one computer, so it is compared only with the members on the joiner's
  // computer (one recorded before computers had ids is on every computer): on one computer a channel's
  // members work in one checkout, where the files they name to each other are, and where that
  // checkout's OpenCode finds their sessions (`reconcile`). A joiner on a computer where the channel
  // has no member joins from its own checkout, at any path.
  const neighbour = ch.members.find(
    (m) =>
      (env.machine === undefined || m.machine === null || m.machine === env.machine) &&
      memberWorktree(ch, m) !== caller.worktree,
  );
  if (neighbour)
    return refused(
      state,
      refuse(
        'worktree_mismatch',
        `Channel "${ch.name}" is worked on in ${memberWorktree(ch, neighbour)} on this computer. Open that worktree; never relink across worktrees.`,
      ),
    );
  const mine = findMember(ch, caller.session_id);
  if (mine)
    return refused(
      state,
      refuse('already_member', `You are already on "${ch.name}" as ${mine.role}. Use that membership.`, {
        role: mine.role,
      }),
    );
  if (ch.members.length >= ch.max_members)
    return refused(
      state,
      refuse('channel_full', `Channel "${ch.name}" is full (${ch.max_members} members). Ask someone to disconnect.`),
    );
  const holder = ch.members.find((m) => m.role.toLowerCase() === role.toLowerCase());
  if (holder)
    return refused(
      state,
      refuse(
        'role_taken',
        `Role "${holder.role}" is taken on "${ch.name}". Pick another role; replacing someone needs them to disconnect first.`,
      ),
    );
  const prompt = typeof args.role_prompt === 'string' ? args.role_prompt.trim() : '';
  if (!prompt) return refused(state, roleFirstPrompt());
  if (empty) {
    ch.worktree = caller.worktree;
    if (!isSentinelProject(caller.project_id)) ch.project_id = caller.project_id;
  }
  ch.members.push(newMember(caller, role, prompt, env.now, env.by, env.machine ?? null));
  const warnings =
    caller.delivery_mode === 'spawn_push' && !caller.host_session_id ? ['spawn_push_unbound'] : undefined;
  const data = {
    channel_id: ch.id,
    role,
    session_id: caller.session_id,
    parent_channel_id: ch.parent_channel_id,
    ...(compactContext ? { compact_context: compactContext } : {}),
    ...(warnings ? { warnings } : {}),
  };
  return done(state, ok(`Joined "${ch.name}" as ${role} (${ch.members.length} members).`, data));
}
