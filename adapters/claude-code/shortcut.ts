// The hook runner's fast path: from an unvalidated glance at the state, is there provably nothing
// to do for this hook (no mail, nothing to bind, confirm or clear)? Then it answers `{}` without
// loading the store, the schemas or the machines. Any doubt → the full path decides.
import { MEMBER_ID_RE } from '../../src/protocol/ids.ts';
import type { HookContext } from './hook-input.ts';

interface RawMember {
  session_id?: unknown;
  host?: unknown;
  host_session_id?: unknown;
  stale?: unknown;
}
interface RawState {
  channels?: Record<string, { lifecycle?: unknown; members?: RawMember[] }>;
  queues?: Record<string, unknown[]>;
  messages?: Record<string, { delivery_status?: unknown; recipient_session_id?: unknown }>;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** True when the hook can answer `{}` at once. */
export function nothingToDo(raw: unknown, ctx: HookContext): boolean {
  const sid = ctx.input.session_id;
  if (ctx.event === null || typeof sid !== 'string' || !sid) return true;
  if (!isObj(raw) || !isObj(raw.channels)) return raw === null; // no state yet: nothing; unreadable: full path
  const s = raw as RawState;
  const rows = Object.values(s.channels!).flatMap((ch) => (ch?.lifecycle === 'active' && Array.isArray(ch.members) ? ch.members : [])).filter((m) => m?.host === ctx.host);
  const bound = rows.filter((m) => m.host_session_id === sid);
  const ids = new Set(bound.map((m) => m.session_id));
  if (ctx.event === 'SessionStart' || ctx.event === 'SessionEnd') return ids.size === 0 && ctx.event === 'SessionEnd';
  if (ids.size > 1) return false; // ambiguous: the full path explains
  if (ids.size === 1) {
    const member = [...ids][0];
    const inFlight = Object.values(s.messages ?? {}).some((e) => e?.recipient_session_id === member && e.delivery_status === 'in_flight');
    if (inFlight) return false; // a wake to confirm, or a dead process's batch to sweep
    if (ctx.event === 'Stop' && ctx.input.stop_hook_active === true) return true;
    return !bound.some((m) => m.stale === true) && !(s.queues?.[member as string]?.length);
  }
  // Unbound: only a member this session could bind to makes work.
  const envId = ctx.env.OPENCOMMS_MEMBER_ID?.trim();
  if (envId && MEMBER_ID_RE.test(envId) && rows.some((m) => m.session_id === envId)) return false;
  return !rows.some((m) => m.host_session_id === null || m.stale === true);
}
