// The console API (operator.md "The console"): each route is one engine operation through the runtime, as
// the operator (project id `gui-local-project`). Success answers 200 with the ToolResult; an
// operation refusal answers 400 with it (`data.reason`).
import { DEFAULT_JOIN_HOST, joinCommandResult } from '../../adapters/join-commands.ts';
import type { OperatorCaller } from '../engine/index.ts';
import type { SessionDetail } from '../engine/operator.ts';
import { refuse, type ToolResult } from '../protocol/result.ts';
import { placed, placeSession } from '../runtime/placement.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { readUsage, releaseCommand } from '../cli/commands/usage.ts';
import type { RefreshReason } from './events.ts';

export interface RouteContext {
  rt: Runtime;
  actor: OperatorCaller;
  /** Decoded path parameters. */
  params: string[];
  query: URLSearchParams;
  body: Record<string, unknown>;
}

export interface Reply {
  status: number;
  body: unknown;
  /** A refresh to announce when the operation succeeded. */
  refresh?: RefreshReason;
}

export type Handler = (c: RouteContext) => Promise<Reply>;

export interface Route {
  method: string;
  pattern: RegExp;
  handler: Handler;
}

/** 200, or 400 for a refusal; an unexpected fault (`internal_error`) is the server's: 500. */
const statusOf = (r: ToolResult<object>) =>
  r.ok ? 200 : (r.data as { reason?: string } | undefined)?.reason === 'internal_error' ? 500 : 400;
const answer = (r: ToolResult<object>, refresh?: RefreshReason): Reply => ({
  status: statusOf(r),
  body: r,
  ...(r.ok && refresh ? { refresh } : {}),
});

async function joinCommand(c: RouteContext): Promise<Reply> {
  const live = await c.rt.run({ op: 'session_get', args: { channel: c.params[0] } });
  if (!live.ok) return answer(live);
  const d = live.data as SessionDetail;
  if (d.kind !== 'live')
    return answer(
      refuse('lifecycle_refused', `"${d.name}" is saved: restore it first, then join the new channel.`, {
        lifecycle: 'saved',
      }),
    );
  const host = c.query.get('host') ?? DEFAULT_JOIN_HOST;
  const role = c.query.get('role') ?? undefined;
  return answer(joinCommandResult(d.name, host, role));
}

const CHANNEL = /^\/api\/channels\/([^/]+)$/;
const SUB = (tail: string) => new RegExp(`^/api/channels/([^/]+)/${tail}$`);

export const ROUTES: readonly Route[] = [
  { method: 'GET', pattern: /^\/api\/channels$/, handler: async (c) => answer(await c.rt.run({ op: 'session_list' })) },
  {
    method: 'POST',
    pattern: /^\/api\/channels$/,
    handler: async (c) =>
      answer(
        await c.rt.run({
          op: 'create_session',
          actor: c.actor,
          args: { channel: c.body.name, max_members: c.body.max_members },
        }),
        'channel_created',
      ),
  },
  {
    method: 'DELETE',
    pattern: CHANNEL,
    // The click (and its confirm dialog) is the confirmation.
    handler: async (c) =>
      answer(
        await c.rt.run({
          op: 'delete_session',
          actor: c.actor,
          args: { channel: c.params[0], confirm: true },
          archive: null,
        }),
        'channel_deleted',
      ),
  },
  {
    method: 'POST',
    pattern: SUB('save'),
    handler: async (c) =>
      answer(
        await c.rt.run({ op: 'save_session', actor: c.actor, args: { channel: c.params[0], summary: c.body.summary } }),
        'channel_saved',
      ),
  },
  {
    method: 'POST',
    pattern: SUB('restore'),
    handler: async (c) =>
      answer(
        await c.rt.run({
          op: 'resume_session',
          actor: c.actor,
          args: { channel: c.params[0], new_name: c.body.new_name },
          archive: null,
        }),
        'channel_restored',
      ),
  },
  {
    method: 'GET',
    pattern: SUB('members'),
    // Each agent with its machine and its process's lease (placement.ts).
    handler: async (c) =>
      answer(
        await placed(
          c.rt.store,
          c.rt.machine,
          await c.rt.run({ op: 'session_get', args: { channel: c.params[0] } }),
          placeSession,
        ),
      ),
  },
  {
    method: 'POST',
    pattern: SUB('members/remove'),
    handler: async (c) =>
      answer(
        await c.rt.run({
          op: 'kick',
          caller: { operator: true },
          args: { channel: c.params[0], target_session_id: c.body.target_session_id, target_role: c.body.target_role },
        }),
        'member_removed',
      ),
  },
  // Delivery on a live channel: POST holds it, DELETE releases it (the CLI's pause / resume).
  {
    method: 'POST',
    pattern: SUB('pause'),
    handler: async (c) =>
      answer(
        await c.rt.run({ op: 'pause', sid: { operator: true }, args: { channel: c.params[0] } }),
        'channel_paused',
      ),
  },
  {
    method: 'DELETE',
    pattern: SUB('pause'),
    handler: async (c) =>
      answer(
        await c.rt.run({ op: 'resume', sid: { operator: true }, args: { channel: c.params[0] } }),
        'channel_unpaused',
      ),
  },
  // The operator speaks (the CLI's send / read): a message into the channel, framed, sender Operator.
  {
    method: 'POST',
    pattern: SUB('messages'),
    handler: async (c) =>
      answer(
        await c.rt.run({
          op: 'send',
          sid: { operator: true },
          args: {
            channel: c.params[0],
            content: c.body.content,
            type: c.body.type,
            to: c.body.to,
            broadcast: c.body.broadcast === true,
          },
        }),
        'message_sent',
      ),
  },
  {
    method: 'GET',
    pattern: SUB('messages'),
    handler: async (c) =>
      answer(
        await c.rt.run({
          op: 'history',
          sid: { operator: true },
          args: { channel: c.params[0], limit: c.query.get('limit') ?? undefined },
        }),
      ),
  },
  { method: 'GET', pattern: SUB('join-command'), handler: joinCommand },
  // Wakes and their cost (the CLI's `usage` and `release`): the cost report of every live channel
  // or of `?channel=`, and the operator's release of held wakes (every member, or `{member}`).
  {
    method: 'GET',
    pattern: /^\/api\/usage$/,
    handler: async (c) => answer(await readUsage(c.rt, c.query.get('channel') ?? undefined)),
  },
  {
    method: 'POST',
    pattern: SUB('release'),
    handler: async (c) =>
      answer(
        await c.rt.run(releaseCommand(c.params[0]!, typeof c.body.member === 'string' ? c.body.member : undefined)),
        'wakes_released',
      ),
  },
  {
    method: 'GET',
    pattern: SUB('deliveries'),
    handler: async (c) => answer(await c.rt.run({ op: 'deliveries', args: { channel: c.params[0] } })),
  },
];

export function match(method: string, path: string): { route: Route; params: string[] } | 'wrong_method' | null {
  let pathMatched = false;
  for (const route of ROUTES) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    pathMatched = true;
    if (route.method !== method) continue;
    try {
      return { route, params: m.slice(1).map((p) => decodeURIComponent(p)) };
    } catch {
      return null; // a malformed %-escape names no channel
    }
  }
  return pathMatched ? 'wrong_method' : null;
}
