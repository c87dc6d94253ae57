// The one channel a command reads and writes, where it is one (Store.mutate's scope): a store
// shared by several computers then orders the command among that channel's changes only, and a
// process applies the changes of the channels it serves only (docs/performance.md, "Many agents
// in one project"). Sends, pulls and the hand-over's steps are the hot path and name one channel;
// every other command (a join, a sweep, an operator's) reads the whole project.
import type { State } from '../protocol/schema.ts';
import { channelNamed, memberships } from './lookup.ts';
import type { Command } from './index.ts';

/** The key of the one live channel `sid` is a member of, or null (none, or several). */
function onlyChannelOf(state: Readonly<State>, sid: string): string | null {
  const rows = memberships(state, sid);
  const first = rows[0]?.ch.name;
  return first !== undefined && rows.every(({ ch }) => ch.name === first) ? first : null;
}

/** The key of the live channel named `raw`, or null. */
function liveChannel(state: Readonly<State>, raw: unknown): string | null {
  const ch = channelNamed(state, raw);
  return ch?.lifecycle === 'active' && state.channels[ch.name] === ch ? ch.name : null;
}

/** How to find the one channel `cmd` reads and writes on a state; undefined: it reads any. */
export function commandScope(cmd: Command): ((state: Readonly<State>) => string | null) | undefined {
  switch (cmd.op) {
    case 'send':
      return (s) => liveChannel(s, cmd.args.channel);
    case 'pull': {
      const named = cmd.args.channel;
      return (s) =>
        named === undefined || named === null || named === '' ? onlyChannelOf(s, cmd.sid) : liveChannel(s, named);
    }
    case 'drain':
    case 'commit':
    case 'requeue':
      return (s) => onlyChannelOf(s, cmd.rid);
    default:
      return undefined;
  }
}
