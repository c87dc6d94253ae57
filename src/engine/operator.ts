// Operator-only operations of the CLI and the console (`channel …`; operator.md "Command line", "The console"): an
// empty active channel that agents then join, and the reads behind channel cards, channel detail
// and the live machine view. The operator sees every channel and archive and is bound by no
// roster; its project id is a sentinel, so a channel's first joiner sets its identity.
import type { ArchiveHead } from '../protocol/archive.ts';
import { isArchiveId } from '../protocol/ids.ts';
import { DEFAULT_MAX_MEMBERS, MAX_MAX_MEMBERS, MIN_MAX_MEMBERS } from '../protocol/limits.ts';
import { ok, type Refusal, type ToolResult } from '../protocol/result.ts';
import type { Channel, Envelope, SessionsState, State } from '../protocol/schema.ts';
import { AGENT_STATE_HELP, deliveryView, sessionsOf, type AgentState } from './deliveries.ts';
import { channelOf, clampOptions, nameTaken } from './link.ts';
import { memberRow } from './reads.ts';
import { channelNotFound, invalidChannelName, normaliseChannelName, tombstoneRefusal } from './lookup.ts';
import { answered, done, refused } from './outcome.ts';
import { archiveNotFound, archiveSummary, compactContext } from './sessions.ts';
import type { Env, OperatorCaller, Outcome } from './types.ts';

export interface CreateSessionArgs {
  channel: unknown;
  max_members?: unknown;
}

/** An empty active channel; a `deleted` tombstone's name is reused, a `saved` one blocks it. */
export function createSession(state: State, actor: OperatorCaller, args: CreateSessionArgs, env: Env): Outcome {
  const name = normaliseChannelName(args.channel);
  if (name === null) return refused(state, invalidChannelName());
  const opts = clampOptions([
    {
      field: 'max_members',
      raw: args.max_members,
      def: DEFAULT_MAX_MEMBERS,
      min: MIN_MAX_MEMBERS,
      max: MAX_MAX_MEMBERS,
      nullable: true,
    },
  ]);
  if ('ok' in opts) return refused(state, opts as Refusal);
  const taken = nameTaken(state, name, 'Open that channel, or choose another name.');
  if (taken) return refused(state, taken);
  const ch = channelOf(actor, name, env, { max_members: opts.max_members! });
  state.channels[name] = ch;
  return done(
    state,
    ok(`Created empty channel "${name}" (0/${ch.max_members} agents). Agents join it with the join command.`, {
      channel_id: ch.id,
      name,
      max_members: ch.max_members,
    }),
  );
}

export interface AgentView {
  session_id: string;
  role: string;
  host: string;
  surface: string;
  delivery_mode: string;
  stale: boolean;
  state: AgentState;
}

const agentsOf = (state: SessionsState, ch: Channel): AgentView[] =>
  ch.members.map((m) => ({
    ...memberRow(m),
    state: m.stale ? 'Offline' : state.working(ch.id, m.session_id) ? 'Working' : 'Idle',
  }));

/** One live channel card (GET /api/channels; operator.md "The console"). */
export const liveCard = (state: SessionsState, ch: Channel) => ({
  name: ch.name,
  channel_id: ch.id,
  lifecycle: ch.lifecycle,
  parent_channel_id: ch.parent_channel_id,
  description: ch.description,
  max_members: ch.max_members,
  paused: ch.paused,
  agents: agentsOf(state, ch),
});
export type LiveCard = ReturnType<typeof liveCard>;
export type ArchiveCard = ReturnType<typeof archiveSummary>;

/** Every live channel (tombstones skipped, protocol.md "Timer, kick, saved channels") and every archive, newest first (protocol.md "Result shape": the
 *  operator sees all). `archives` come from the store, newest first. */
export const sessionList = (state: State, archives: readonly ArchiveHead[]): Outcome =>
  answered(state, listSessions(sessionsOf(state), archives));

/** sessionList's answer from what the session reads need of a state (the store's sessions index). */
export function listSessions(state: SessionsState, archives: readonly ArchiveHead[]) {
  const live = Object.values(state.channels)
    .filter((c) => c.lifecycle === 'active')
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((c) => liveCard(state, c));
  const archived = archives.map((a) => archiveSummary(a));
  return ok(`${live.length} live channel(s), ${archived.length} saved.`, { live, archived });
}

export type SessionDetail = (
  | ({ kind: 'live'; compact_context: string | null } & LiveCard)
  | {
      kind: 'archived';
      name: string;
      archive_id: string;
      lifecycle: 'saved';
      description: string | null;
      summary: string;
      saved_at: number;
      message_count: number;
      agents: AgentView[];
    }
) & {
  /** What Offline, Working and Idle mean (the console's tooltip). */
  agent_state_help: string;
};

/**
 * A live channel's roster with agent states (+ the compact context of the archive it was restored
 * from), or a saved channel's archive view, where every agent is Offline. `archive` is, for a
 * live channel, its parent's archive; otherwise the archive the name or id resolves to.
 */
export const sessionGet = (state: State, args: { channel: unknown }, archive: ArchiveHead | null): Outcome =>
  answered<object>(state, getSession(sessionsOf(state), args, archive));

/** sessionGet's answer from what the session reads need of a state (the store's sessions index). */
export function getSession(
  state: SessionsState,
  args: { channel: unknown },
  archive: ArchiveHead | null,
): ToolResult<SessionDetail> | Refusal {
  const name = normaliseChannelName(args.channel);
  const ch = name === null ? undefined : state.channels[name];
  if (ch?.lifecycle === 'active') {
    const compact = archive && archive.channel_id === ch.parent_channel_id ? compactContext(archive) : null;
    const detail: SessionDetail = {
      kind: 'live',
      ...liveCard(state, ch),
      compact_context: compact,
      agent_state_help: AGENT_STATE_HELP,
    };
    return ok(`Channel "${ch.name}": ${ch.members.length}/${ch.max_members} agent(s).`, detail);
  }
  if (!archive) {
    if (ch) return tombstoneRefusal(ch);
    if (name === null && !isArchiveId(args.channel)) return invalidChannelName();
    return name === null ? archiveNotFound() : channelNotFound(name);
  }
  const detail: SessionDetail = {
    kind: 'archived',
    name: archive.name,
    archive_id: archive.channel_id,
    lifecycle: 'saved',
    description: archive.description,
    summary: archive.summary,
    saved_at: archive.saved_at,
    message_count: archive.message_count,
    agents: archive.members.map((m) => ({ ...memberRow(m), state: 'Offline' as const })),
    agent_state_help: AGENT_STATE_HELP,
  };
  return ok(`Saved channel "${archive.name}" (${archive.message_count} messages).`, detail);
}

/** The live machine view of one channel (operator.md "The console"); `logged` = its newest history-log envelopes. */
export function deliveries(
  state: State,
  args: { channel: unknown },
  logged: readonly Envelope[],
  now: number,
): Outcome {
  const name = normaliseChannelName(args.channel);
  if (name === null) return refused(state, invalidChannelName());
  const ch = state.channels[name];
  if (!ch) return refused(state, channelNotFound(name));
  if (ch.lifecycle !== 'active') return refused(state, tombstoneRefusal(ch));
  const view = deliveryView(state, ch, logged, now);
  return answered(
    state,
    ok(`${view.envelopes.length} envelope(s), ${view.recipients.length} recipient(s) on "${ch.name}".`, view),
  );
}
