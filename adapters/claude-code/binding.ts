// Which member a host session is (hosts.md "The hook runner": resolve and binding). A session resolves to
// the one member whose rows of this host name it; otherwise it may bind, in order: the env pin
// OPENCOMMS_MEMBER_ID, then the one pinned member of this host that is unbound or stale. Several
// candidates bind nothing: the user is told how to disambiguate. A's pin never binds for B: a member
// bound to a live session is never a candidate.
import type { Member, State } from '../../src/protocol/schema.ts';
import { isMemberId } from '../../src/protocol/ids.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';
import { listPins, resolvePaths } from '../../src/store/index.ts';
import type { HookContext } from './hook-input.ts';

const rowsOf = (state: Readonly<State>, host: string): Member[] =>
  Object.values(state.channels).flatMap((ch) =>
    ch.lifecycle === 'active' ? ch.members.filter((m) => m.host === host) : [],
  );

/** The member bound to this host session: one id, several (ambiguous), or none. */
export function resolveMember(
  state: Readonly<State>,
  host: string,
  sid: string,
): { member: string } | { ambiguous: number } | null {
  const ids = new Set(
    rowsOf(state, host)
      .filter((m) => m.host_session_id === sid)
      .map((m) => m.session_id),
  );
  if (ids.size === 1) return { member: [...ids][0]! };
  return ids.size > 1 ? { ambiguous: ids.size } : null;
}

export interface Binding {
  member: string | null;
  /** For the user (`systemMessage`): why nothing was bound and what to do. */
  guidance?: string;
}

export async function resolveOrBind(rt: Runtime, ctx: HookContext, sid: string): Promise<Binding> {
  const state = await rt.peek();
  const found = resolveMember(state, ctx.host, sid);
  if (found && 'member' in found) return { member: found.member };
  const rows = rowsOf(state, ctx.host);
  const bind = async (member: string): Promise<Binding> => {
    const r = await rt.run({ op: 'bind', member, host: ctx.host, host_session_id: sid });
    return r.ok ? { member } : { member: null, guidance: `OpenComms: ${r.message}` };
  };

  const envId = ctx.env.OPENCOMMS_MEMBER_ID?.trim();
  if (envId && isMemberId(envId)) {
    if (rows.some((m) => m.session_id === envId)) return bind(envId);
    return {
      member: null,
      guidance: `OpenComms: OPENCOMMS_MEMBER_ID=${envId} names no ${ctx.host} member in this project yet; join a channel from this session (opencomms_create or opencomms_join), then its mail arrives here.`,
    };
  }
  const pins = (await listPins(resolvePaths(ctx.project))).pins.filter((p) => p.host === ctx.host);
  const candidates = pins.filter((p) => {
    const mine = rows.filter((m) => m.session_id === p.member_id);
    return mine.length > 0 && mine.some((m) => m.host_session_id === null || m.stale);
  });
  if (candidates.length === 1) return bind(candidates[0]!.member_id);
  if (candidates.length > 1)
    return {
      member: null,
      guidance: `OpenComms: ${candidates.length} pinned ${ctx.host} members are unbound, so this session was bound to none of them. Launch those sessions one at a time (each binds at its start), or set OPENCOMMS_MEMBER_ID=<member id> in the environment of the session.`,
    };
  if (found && 'ambiguous' in found)
    return {
      member: null,
      guidance: `OpenComms: ${found.ambiguous} members are bound to this ${ctx.host} session; no mail is delivered here until it is fixed (set OPENCOMMS_MEMBER_ID, or run \`opencomms bind\`).`,
    };
  return { member: null };
}
