// Name rules and the channel-scoped checks every operation shares, in the protocol's check order.
import { raw } from '../protocol/draft.ts';
import { CHANNEL_NAME_RE, ROLE_RE } from '../protocol/ids.ts';
import { MAX_CHANNEL_NAME, MAX_ERRORS, SENTINEL_PROJECT_IDS } from '../protocol/limits.ts';
import { refuse, type Refusal } from '../protocol/result.ts';
import type { Channel, ErrorEntry, Member, State } from '../protocol/schema.ts';

export const normaliseChannelName = (raw: unknown): string | null => {
  if (typeof raw !== 'string') return null;
  const name = raw.trim().toLowerCase();
  return name.length >= 1 && name.length <= MAX_CHANNEL_NAME && CHANNEL_NAME_RE.test(name) ? name : null;
};

export const normaliseRole = (raw: unknown): string | null => {
  if (typeof raw !== 'string') return null;
  const role = raw.trim().replace(/\s+/g, ' ');
  return ROLE_RE.test(role) ? role : null;
};

export const invalidChannelName = () =>
  refuse(
    'invalid_channel_name',
    'Invalid channel name: use 1-64 lowercase letters, digits, "-" or "_", starting with a letter or digit.',
  );

export const invalidRole = () =>
  refuse(
    'invalid_role',
    'Invalid role: 1-32 characters, starting with a letter; letters, digits, spaces, "-" and "_" only.',
  );

export const isSentinelProject = (id: string) => (SENTINEL_PROJECT_IDS as readonly string[]).includes(id);

/** The channel (live or tombstone) a raw argument names, normalised as every lookup is. */
export const channelNamed = (state: Pick<State, 'channels'>, raw: unknown): Channel | undefined => {
  const name = normaliseChannelName(raw);
  return name === null ? undefined : state.channels[name];
};

// The two scans below run on every call (the adapters' roster gate, the routing of a send's wake)
// over every channel of the project: plain loops, because Object.values / flatMap allocate an
// array per call and cost several times the loop.

/** Whether `sid` is on the roster of any active channel. */
export function onLiveRoster(state: Readonly<State>, sid: string): boolean {
  const channels = state.channels;
  for (const name in channels) {
    const c = channels[name]!;
    if (c.lifecycle === 'active' && findMember(c, sid)) return true;
  }
  return false;
}

/** The checkout a member works in, a path on its computer: the one it linked from; a member
 *  recorded before members had one is on the channel's worktree (the worktree check bound it there). */
export const memberWorktree = (ch: Pick<Channel, 'worktree'>, m: Pick<Member, 'worktree'>): string =>
  m.worktree ?? ch.worktree;

export const findMember = (ch: Channel, sid: string): Member | undefined =>
  ch.members.find((m) => m.session_id === sid);

/** Every live membership of `sid`, with its channel. */
export function memberships(state: Readonly<State>, sid: string): Array<{ ch: Channel; m: Member }> {
  const out: Array<{ ch: Channel; m: Member }> = [];
  const channels = state.channels;
  for (const name in channels) {
    const ch = channels[name]!;
    if (ch.lifecycle !== 'active') continue;
    for (const m of ch.members) if (m.session_id === sid) out.push({ ch, m });
  }
  return out;
}

export function tombstoneRefusal(ch: Channel): Refusal {
  return ch.lifecycle === 'saved'
    ? refuse(
        'lifecycle_refused',
        `Channel "${ch.name}" was saved and archived. Restore it first (opencomms_resume_session or \`opencomms channel restore ${ch.name}\`).`,
        {
          lifecycle: 'saved',
          hint: `opencomms_resume_session channel=${ch.name}`,
        },
      )
    : refuse(
        'lifecycle_refused',
        `Channel "${ch.name}" was deleted and carries no context; pick another name or create it anew.`,
        {
          lifecycle: 'deleted',
          hint: 'the session is gone',
        },
      );
}

const NOT_FOUND_NEXT =
  'Do not create a channel or replace anyone: report this to the operator, who checks the project and worktree.';
export const channelNotFound = (name: string) =>
  refuse('channel_not_found', `No channel "${name}" in this project. ${NOT_FOUND_NEXT}`);

/** A caller's own channel argument as shown back to it: trimmed, lowercased, cut to a name's length. */
export const shownName = (raw: unknown) =>
  typeof raw === 'string' ? raw.trim().toLowerCase().slice(0, MAX_CHANNEL_NAME) : '';

/** An existing channel (live or tombstone) by raw name. A name no channel has is
 *  `channel_not_found` whatever its spelling: only create and restore judge a new name's shape. */
export function lookupChannel(state: Readonly<State>, raw: unknown): { ch: Channel } | { refusal: Refusal } {
  const ch = channelNamed(state, raw);
  if (ch) return { ch };
  // A name longer than any channel's is answered as such, not as the channel its first
  // MAX_CHANNEL_NAME characters would name.
  const length = typeof raw === 'string' ? raw.trim().length : 0;
  if (length > MAX_CHANNEL_NAME)
    return {
      refusal: refuse(
        'channel_not_found',
        `No channel has that name: it has ${length} characters, and a channel name has at most ${MAX_CHANNEL_NAME}. Check the name. ${NOT_FOUND_NEXT}`,
      ),
    };
  return { refusal: channelNotFound(shownName(raw)) };
}

/** channel_not_found → lifecycle_refused: an active channel by raw name. */
export function liveChannel(state: Readonly<State>, raw: unknown): { ch: Channel } | { refusal: Refusal } {
  const found = lookupChannel(state, raw);
  if ('refusal' in found) return found;
  return found.ch.lifecycle === 'active' ? found : { refusal: tombstoneRefusal(found.ch) };
}

export const notMember = (ch: Channel) =>
  refuse('not_member', `You are not a member of channel "${ch.name}". Join it first, or use a channel you belong to.`);

/** channel_not_found → lifecycle_refused → not_member, the shared prefix of channel-scoped calls. */
export function memberChannel(
  state: Readonly<State>,
  raw: unknown,
  sid: string,
): { ch: Channel; me: Member } | { refusal: Refusal } {
  const found = liveChannel(state, raw);
  if ('refusal' in found) return found;
  const me = findMember(found.ch, sid);
  if (!me) return { refusal: notMember(found.ch) };
  return { ch: found.ch, me };
}

/** Channel names by id, per plain `channels` object. A hit is checked against the channel it
 *  names, so a stale entry (a channel renamed, deleted, replaced) only costs a rebuild. */
const namesById = new WeakMap<object, Map<string, string>>();

/** Looked up in the plain state (inside a mutation every channel visited would be wrapped for
 *  tracking), through an index: a pull places every envelope, and a scan of every channel per
 *  envelope was a tenth of a pull of 100 with 25 channels. The one found is returned through
 *  `state`. */
export function channelById(state: State, id: string): Channel | undefined {
  const channels = raw(state.channels);
  let index = namesById.get(channels);
  let name = index?.get(id);
  if (name === undefined || channels[name]?.id !== id) {
    index = new Map();
    for (const n in channels) index.set(channels[n]!.id, n);
    namesById.set(channels, index);
    name = index.get(id);
    if (name === undefined) return undefined;
  }
  return state.channels[name];
}

/** Appends an error entry, keeping the newest MAX_ERRORS. */
export function recordError(state: State, entry: ErrorEntry) {
  state.errors.push(entry);
  if (state.errors.length > MAX_ERRORS) state.errors.splice(0, state.errors.length - MAX_ERRORS);
}

export const memberLabel = (m: Pick<Member, 'role' | 'session_id'>) => `${m.role} (${m.session_id})`;
