// The hook runner's fast path: from an unvalidated glance at the state, is there provably nothing
// to do for this hook (no mail, nothing to bind, confirm or clear)? Then it answers `{}` without
// loading the store, the schemas or the machines. Any doubt → the full path decides.
import { frameIdMark } from '../../src/framing.ts';
import { MEMBER_ID_RE } from '../../src/protocol/ids.ts';
import { processTag } from '../../src/runtime/process.ts';
import type { Glance } from '../../src/store/types.ts';
import type { HookContext } from './hook-input.ts';

/**
 * - `nothing`: answer `{}` now;
 * - `confirm`: the prompt of a woken turn shows every batch a waiter handed this Claude Code:
 *   answer `{}` now and commit them off the turn's critical path;
 * - `full`: load the full path (bind, clear, deliver, confirm, sweep).
 */
export type Triage = 'nothing' | 'confirm' | 'full';

interface RawMember {
  session_id?: unknown;
  host?: unknown;
  host_session_id?: unknown;
  stale?: unknown;
}
interface RawState {
  channels?: Record<string, { lifecycle?: unknown; members?: RawMember[] }>;
  queues?: Record<string, unknown[]>;
  messages?: Record<string, { delivery_status?: unknown; recipient_session_id?: unknown; in_flight_by?: unknown }>;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function triage(g: Glance, ctx: HookContext): Triage {
  if (g.kind === 'unknown') return ctx.event === null || !ctx.input.session_id ? 'nothing' : 'full';
  const raw = g.kind === 'state' ? g.state : null;
  if (nothingToDo(raw, ctx)) return 'nothing';
  return confirmOnly(raw as RawState, ctx) ? 'confirm' : 'full';
}

/** The woken turn's UserPromptSubmit, bound, not stale, and its prompt names every envelope held in
 *  flight for this member (all of them under this Claude Code's tag). Mail still pending does not
 *  need the full path: a prompt that carries a wake gets nothing newer (hook-events.ts). */
function confirmOnly(s: RawState, ctx: HookContext): boolean {
  const sid = ctx.input.session_id;
  const prompt = ctx.input.prompt;
  const pid = Number(ctx.env.CLAUDE_PID);
  if (
    ctx.event !== 'UserPromptSubmit' ||
    typeof prompt !== 'string' ||
    !Number.isInteger(pid) ||
    pid <= 0 ||
    !isObj(s.channels)
  )
    return false;
  const bound = Object.values(s.channels)
    .flatMap((ch) => (ch?.lifecycle === 'active' && Array.isArray(ch.members) ? ch.members : []))
    .filter((m) => m?.host === ctx.host && m.host_session_id === sid);
  const member = bound[0]?.session_id;
  if (!bound.length || bound.some((m) => m.session_id !== member || m.stale === true) || typeof member !== 'string')
    return false;
  const held = Object.entries(s.messages ?? {}).filter(
    ([, e]) => e?.recipient_session_id === member && e.delivery_status === 'in_flight',
  );
  const tag = processTag(pid);
  return held.length > 0 && held.every(([id, e]) => e.in_flight_by === tag && prompt.includes(frameIdMark(id)));
}

/** True when the hook can answer `{}` at once (`raw` null: there is no state yet). */
function nothingToDo(raw: Record<string, unknown> | null, ctx: HookContext): boolean {
  const sid = ctx.input.session_id;
  if (ctx.event === null || typeof sid !== 'string' || !sid) return true;
  if (raw === null) return true;
  if (!isObj(raw.channels)) return false; // not the shape we know: the full path decides
  const s = raw as RawState;
  const rows = Object.values(s.channels!)
    .flatMap((ch) => (ch?.lifecycle === 'active' && Array.isArray(ch.members) ? ch.members : []))
    .filter((m) => m?.host === ctx.host);
  const bound = rows.filter((m) => m.host_session_id === sid);
  const ids = new Set(bound.map((m) => m.session_id));
  if (ctx.event === 'SessionStart' || ctx.event === 'SessionEnd') return ids.size === 0 && ctx.event === 'SessionEnd';
  if (ids.size > 1) return false; // ambiguous: the full path explains
  if (ids.size === 1) {
    const member = [...ids][0];
    const inFlight = Object.values(s.messages ?? {}).some(
      (e) => e?.recipient_session_id === member && e.delivery_status === 'in_flight',
    );
    if (inFlight) return false; // a wake to confirm, or a dead process's batch to sweep
    if (ctx.event === 'Stop' && ctx.input.stop_hook_active === true) return true;
    return !bound.some((m) => m.stale === true) && !s.queues?.[member as string]?.length;
  }
  // Unbound: only a member this session could bind to makes work.
  const envId = ctx.env.OPENCOMMS_MEMBER_ID?.trim();
  if (envId && MEMBER_ID_RE.test(envId) && rows.some((m) => m.session_id === envId)) return false;
  return !rows.some((m) => m.host_session_id === null || m.stale === true);
}
