// Saved channels: save, restore, delete, archive reads (protocol.md "Timer, kick, saved channels", "Archives").
// Archives are read by the shell and passed in; an archive to write comes back in `writes`, and
// the store writes it before it saves the tombstone, so a crash never loses the saved messages.
import { frameContent, frameWritten, UNTRUSTED_NOTICE } from '../framing.ts';
import { messageView } from './reads.ts';
import type { Archive, ArchiveHead } from '../protocol/archive.ts';
import {
  DEFAULT_ARCHIVE_LIMIT,
  FINAL_NOTE_CHARS,
  MAX_ARCHIVE_LIMIT,
  MAX_ARCHIVE_MESSAGES,
  MAX_CHANNEL_NAME,
  MAX_RESUME_LADDER,
  MAX_SUMMARY_CHARS,
  DEFAULT_WAKES_PER_CHANNEL,
  DEFAULT_WAKES_PER_MEMBER,
} from '../protocol/limits.ts';
import { ok, refuse, type Refusal } from '../protocol/result.ts';
import type { Channel, Envelope, State } from '../protocol/schema.ts';
import { readLimit } from './deliver.ts';
import { channelOf } from './link.ts';

/** A wake budget an archive kept: a number, null (none), or the default (saved before budgets). */
const wakeBudget = (v: unknown, def: number): number | null => (v === null ? null : typeof v === 'number' ? v : def);
import {
  channelNotFound,
  findMember,
  invalidChannelName,
  liveChannel,
  lookupChannel,
  memberChannel,
  normaliseChannelName,
  notMember,
  shownName,
  tombstoneRefusal,
} from './lookup.ts';
import { answered, done, refused } from './outcome.ts';
import { forget } from './retention.ts';
import { stepChannel, stepEnvelope } from './transitions.ts';
import type { Env, OperatorCaller, Outcome } from './types.ts';

export type Actor = { sid: string; project_id: string; worktree: string } | OperatorCaller;
const isOperator = (a: Actor): a is OperatorCaller => 'operator' in a;

const iso = (ms: number) => new Date(ms).toISOString();

/** `count` = every message of the channel; `messages` = the newest of them, oldest first. */
function generatedSummary(ch: Channel, messages: Envelope[], count: number): string {
  if (!messages.length)
    return `Channel "${ch.name}" with ${ch.members.map((m) => m.role).join(', ') || 'no members'}; no messages.`;
  const roles = [...new Set(messages.map((m) => m.sender_role))];
  const last = messages.at(-1)!;
  return `${count} message(s) on "${ch.name}" between ${roles.join(', ')}, from ${iso(messages[0]!.timestamp)} to ${iso(last.timestamp)}; last from ${last.sender_role}.`;
}

/** What joiners of a restored channel (and `mode=summary`) read. The summary and the final note
 *  were written by members of the saved channel, so they reach agents framed as peer text. */
export function compactContext(a: ArchiveHead): string {
  const written = [`Summary: ${a.summary}`, a.final_state_note ? `Final state: ${a.final_state_note}` : '']
    .filter(Boolean)
    .join('\n');
  return [
    `OpenComms restored the saved channel "${a.name}" (saved ${iso(a.saved_at)}).`,
    `Roles: ${a.members.map((m) => m.role).join(', ') || '(none)'}.`,
    `Messages archived: ${a.message_count}. Use opencomms_archive mode=messages channel=${a.channel_id} for more.`,
    frameWritten(written, `members of the saved channel "${a.name}"`),
  ].join('\n');
}

/** Live envelopes of a channel (hot state) merged with its logged history, oldest first. */
function channelMessages(state: State, ch: Channel, logged: Envelope[]): Envelope[] {
  const hot = Object.values(state.messages).filter((e) => e.channel_id === ch.id);
  const seen = new Set(hot.map((e) => e.message_id));
  return [...hot, ...logged.filter((e) => e.channel_id === ch.id && !seen.has(e.message_id))].sort(
    (a, b) => a.timestamp - b.timestamp,
  );
}

/** Removes every envelope of the channel from live state; pending mail is rejected first when
 *  `reject` (delete), or archived as it is (save). */
function purge(state: State, ch: Channel, now: number, reject: boolean) {
  for (const e of Object.values(state.messages)) {
    if (e.channel_id !== ch.id) continue;
    if (reject && e.delivery_status === 'pending') stepEnvelope(e, { type: 'REJECT', now });
    forget(state, e.message_id);
  }
  ch.members = [];
  ch.cooldown_until = {};
  ch.retry_at = {};
  ch.holds = {};
}

function channelFor(state: State, actor: Actor, raw: unknown): { ch: Channel } | { refusal: Refusal } {
  if (isOperator(actor)) return liveChannel(state, raw);
  const scoped = memberChannel(state, raw, actor.sid);
  return 'refusal' in scoped ? scoped : { ch: scoped.ch };
}

/** `logged` = the newest logged envelopes (the archive keeps at most MAX_ARCHIVE_MESSAGES);
 *  `loggedIds` = every id in the channel's log, so message_count counts the whole channel. */
export function save(
  state: State,
  actor: Actor,
  args: { channel: unknown; summary?: unknown },
  logged: Envelope[],
  env: Env,
  loggedIds: ReadonlySet<string> = new Set(logged.map((e) => e.message_id)),
): Outcome {
  const found = channelFor(state, actor, args.channel);
  if ('refusal' in found) return refused(state, found.refusal);
  const { ch } = found;
  const given = typeof args.summary === 'string' ? args.summary.trim() : '';
  if (given.length > MAX_SUMMARY_CHARS)
    return refused(
      state,
      refuse(
        'summary_too_large',
        `The summary has ${given.length} chars; the limit is ${MAX_SUMMARY_CHARS}. Shorten it.`,
      ),
    );
  const all = channelMessages(state, ch, logged);
  const messages = all.slice(-MAX_ARCHIVE_MESSAGES);
  const hotOnly = Object.values(state.messages).filter(
    (e) => e.channel_id === ch.id && !loggedIds.has(e.message_id),
  ).length;
  const messageCount = loggedIds.size + hotOnly;
  const me = isOperator(actor) ? null : findMember(ch, actor.sid)!;
  const summary = given || generatedSummary(ch, all, messageCount);
  const archive: Archive = {
    schema: 1,
    channel_id: ch.id,
    name: ch.name,
    parent_channel_id: ch.parent_channel_id,
    description: ch.description,
    summary,
    members: ch.members,
    budgets: { ...ch.budgets },
    created_at: ch.created_at,
    saved_at: env.now,
    saved_by: me?.session_id ?? null,
    saved_by_role: me?.role ?? null,
    message_count: messageCount,
    messages,
    final_state_note: (all.at(-1)?.content ?? '').slice(0, FINAL_NOTE_CHARS),
  };
  purge(state, ch, env.now, false);
  stepChannel(ch, { type: 'SAVE', now: env.now });
  return done(
    state,
    ok(`Saved "${ch.name}" (${messageCount} messages). Restore it with opencomms_resume_session channel=${ch.name}.`, {
      archive_id: ch.id,
      message_count: messageCount,
      summary,
    }),
    [],
    { archive },
  );
}

const inRoster = (a: ArchiveHead, sid: string) => a.members.some((m) => m.session_id === sid);
const notArchivedMember = () =>
  refuse(
    'not_archived_member',
    'You are not in the archived roster. Ask someone from it, or the operator (`opencomms channel restore`).',
  );
export const archiveNotFound = () =>
  refuse('archive_not_found', 'No saved channel matches. List archives with opencomms_archive.');

/** A free name for a restored channel: `new_name`, or the ladder base, base-r2 … base-r9. */
function restoreName(state: State, archive: Archive, raw: unknown): string | Refusal {
  const free = (n: string) => !state.channels[n] || state.channels[n]!.lifecycle !== 'active';
  if (raw !== undefined && raw !== null && raw !== '') {
    const name = normaliseChannelName(raw);
    if (name === null) return invalidChannelName();
    return free(name) ? name : refuse('channel_exists', `Channel "${name}" already exists. Choose another new_name.`);
  }
  const base = archive.name.slice(0, MAX_CHANNEL_NAME - 3);
  // `base`, then MAX_RESUME_LADDER suffixed rungs: base-r2 … base-r9 (the restore ladder, protocol.md "Rules and defaults").
  for (let i = 1; i <= MAX_RESUME_LADDER + 1; i++) {
    const name = i === 1 ? archive.name : `${base}-r${i}`;
    if (free(name)) return name;
  }
  return refuse('resume_ladder_exhausted', `"${archive.name}" and its -r2 … -r9 names are all taken. Pass new_name.`);
}

export function restore(
  state: State,
  actor: Actor,
  args: { channel: unknown; new_name?: unknown },
  archive: Archive | null,
  env: Env,
): Outcome {
  if (!archive) return refused(state, archiveNotFound());
  if (!isOperator(actor) && !inRoster(archive, actor.sid)) return refused(state, notArchivedMember());
  const name = restoreName(state, archive, args.new_name);
  if (typeof name !== 'string') return refused(state, name);
  const ch = channelOf(actor, name, env, {
    parent_channel_id: archive.channel_id,
    description: archive.description,
    budgets: {
      max_runtime_ms: archive.budgets.max_runtime_ms ?? null,
      max_delivered_messages: archive.budgets.max_delivered_messages ?? null,
      max_wakes_per_member: wakeBudget(archive.budgets.max_wakes_per_member, DEFAULT_WAKES_PER_MEMBER),
      max_wakes_per_channel: wakeBudget(archive.budgets.max_wakes_per_channel, DEFAULT_WAKES_PER_CHANNEL),
    },
  });
  state.channels[name] = ch;
  return done(
    state,
    ok(`Restored "${archive.name}" as new channel "${name}". Members join it with opencomms_join channel=${name}.`, {
      channel_id: ch.id,
      name,
      parent_channel_id: archive.channel_id,
      members: [],
      archive_name: archive.name,
    }),
  );
}

export function deleteSession(
  state: State,
  actor: Actor,
  args: { channel: unknown; confirm?: unknown },
  archive: Archive | null,
  env: Env,
): Outcome {
  if (args.confirm !== true)
    return refused(
      state,
      refuse(
        'confirm_required',
        "Deletion is permanent: a live channel's members and mail are discarded, a saved one's archive and history removed. Repeat with confirm=true.",
      ),
    );
  const name = normaliseChannelName(args.channel);
  const ch = name === null ? undefined : state.channels[name];
  if (!ch && !archive) {
    // As every lookup answers it: a name over the limit by its length, never by its first characters.
    const found = lookupChannel(state, args.channel);
    return refused(state, 'refusal' in found ? found.refusal : channelNotFound(shownName(args.channel)));
  }
  if (ch?.lifecycle === 'deleted') return refused(state, tombstoneRefusal(ch));
  if (ch?.lifecycle === 'active') {
    if (!isOperator(actor) && !findMember(ch, actor.sid)) return refused(state, notMember(ch));
    purge(state, ch, env.now, true);
    stepChannel(ch, { type: 'DELETE', now: env.now });
    // Its envelopes already moved to the channel's history log go too: a deleted channel carries no context.
    return done(state, ok(`Deleted "${ch.name}"; its mail was discarded.`, { name: ch.name, deleted: 'live' }), [], {
      deleteHistory: [ch.id],
    });
  }
  if (!archive) return refused(state, archiveNotFound());
  if (!isOperator(actor) && !inRoster(archive, actor.sid)) return refused(state, notArchivedMember());
  const tomb = Object.values(state.channels).find((c) => c.id === archive.channel_id);
  if (tomb) stepChannel(tomb, { type: 'DELETE', now: env.now });
  return done(state, ok(`Deleted the archive of "${archive.name}".`, { name: archive.name, deleted: 'archive' }), [], {
    deleteArchive: archive.channel_id,
    deleteHistory: [archive.channel_id],
  });
}

/** `forAgent`: the description a member wrote reaches other agents framed as peer text. */
export function archiveSummary(a: ArchiveHead, forAgent = false) {
  return {
    archive_id: a.channel_id,
    name: a.name,
    description: a.description !== null && forAgent ? frameContent(a.description) : a.description,
    saved_at: a.saved_at,
    saved_by_role: a.saved_by_role,
    message_count: a.message_count,
    roles: a.members.map((m) => m.role),
  };
}

/** `archives` = every archive's head (newest first) for list; `named` = the one named archive,
 *  read whole, for summary/messages. */
export function archiveRead(
  state: State,
  actor: Actor,
  args: { channel?: unknown; mode?: unknown; limit?: unknown },
  archives: readonly ArchiveHead[],
  named: Archive | null,
): Outcome {
  const mode = args.mode === undefined || args.mode === null || args.mode === '' ? 'list' : args.mode;
  const visible = (a: ArchiveHead) => isOperator(actor) || inRoster(a, actor.sid);
  if (mode === 'list') {
    const list = archives.filter(visible).map((a) => archiveSummary(a, !isOperator(actor)));
    return answered(
      state,
      ok(`${list.length} saved channel(s).`, { archives: list, untrusted_notice: UNTRUSTED_NOTICE }),
    );
  }
  if (mode !== 'summary' && mode !== 'messages')
    return refused(state, refuse('invalid_argument', 'mode must be list, summary or messages.', { field: 'mode' }));
  if (typeof args.channel !== 'string' || !args.channel.trim())
    return refused(
      state,
      refuse('invalid_argument', `mode=${mode} needs channel (a saved name or archive id).`, { field: 'channel' }),
    );
  const a = named;
  if (!a) return refused(state, archiveNotFound());
  if (!visible(a)) return refused(state, notArchivedMember());
  if (mode === 'summary')
    return answered(
      state,
      ok(`Archive of "${a.name}".`, { compact_context: compactContext(a), archive_id: a.channel_id }),
    );
  const limit = readLimit(args.limit, DEFAULT_ARCHIVE_LIMIT, MAX_ARCHIVE_LIMIT);
  const messages = [...a.messages].reverse().slice(0, limit).map(messageView);
  return answered(
    state,
    ok(`${messages.length} archived message(s) of "${a.name}", newest first.`, {
      messages,
      untrusted_notice: UNTRUSTED_NOTICE,
    }),
  );
}
