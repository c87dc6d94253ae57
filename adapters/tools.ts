// The agent tool table shared by every host adapter (protocol.md "Result shape", "MCP server and wire"): argument schemas,
// descriptions an agent can act on, required arguments, and the engine command each tool becomes.
// Identity is never an argument: the adapter supplies it in the ToolContext.
import * as z from 'zod';
import type { Caller, Command } from '../src/engine/index.ts';

export interface ToolContext {
  pin: string;
  caller: (spawnPush: boolean) => Caller;
  actor: { sid: string; project_id: string; worktree: string };
  /** What the host shows whole of one tool result (adapters/route-limits.ts): a read answers within it. */
  resultLimit?: number;
}

/** A tool as both adapters list and call it. `prepare` checks raw arguments against the tool's
 *  schema and hands back the engine command with typed arguments, or the first problem. */
export interface ToolDef {
  name: string;
  description: string;
  shape: z.ZodRawShape;
  required: string[];
  /** Allowed before the member is on any live roster (it checks an archive or creates a row). */
  bootstrap?: boolean;
  /** MCP lists it only with --admin (OpenCode always has it). */
  admin?: boolean;
  /** Only the MCP server has it (OpenCode sessions are pushed to). */
  mcpOnly?: boolean;
  /** Channel-scoped: an OpenCode session in no channel gets `not_linked`. */
  linked?: boolean;
  prepare(raw: Record<string, unknown>): Prepared;
}

export type Prepared =
  | { ok: true; args: Record<string, unknown>; command: (ctx: ToolContext) => Command }
  | { ok: false; problem: string };

type Spec<S extends z.ZodRawShape> = Omit<ToolDef, 'prepare' | 'shape'> & {
  shape: S;
  command(args: z.output<z.ZodObject<S>>, ctx: ToolContext): Command;
};

/** One tool: its schema compiled once; unknown keys (any identity-like ones included) are dropped
 *  by the parse, never obeyed. */
function tool<S extends z.ZodRawShape>(spec: Spec<S>): ToolDef {
  const schema = z.object(spec.shape);
  const { command, ...def } = spec;
  return {
    ...def,
    prepare(raw) {
      const r = schema.safeParse(raw);
      if (!r.success) {
        const i = r.error.issues[0]!;
        return {
          ok: false,
          problem: `Invalid argument ${i.path.join('.') || '(arguments)'} for ${spec.name}: ${i.message}`,
        };
      }
      const args = r.data;
      return { ok: true, args, command: (ctx) => command(args, ctx) };
    },
  };
}

const channel = z.string().describe('Channel name (lowercase letters, digits, "-", "_"; at most 64).');
const limit = z.number().describe('How many items (default 20, max 100).');
const role = z.string().describe('Your role label, unique in the channel (e.g. "Reviewer"). 1-32 chars, letter first.');
const rolePrompt = z
  .string()
  .describe('Standing instructions for yourself in this role; injected into your own context, never sent to peers.');
const spawnPush = z
  .boolean()
  .describe(
    'Have peers continue this host session with the host CLI when mail arrives (spawn_push). Default false: you read mail with opencomms_pull.',
  );

export const TOOLS: ToolDef[] = [
  tool({
    name: 'opencomms_create',
    description:
      'Create a channel in this project and join it as its first member (the coordinator). Others join with opencomms_join.',
    shape: {
      channel,
      role,
      role_prompt: rolePrompt,
      max_members: z.number().optional().describe('Member cap (default 8, clamped 2..32).'),
      rate_limit: z.number().optional().describe('Logical sends per minute for the channel (default 20, 1..1000).'),
      max_hops: z.number().optional().describe('Reply-chain hop cap (default 4, 1..50).'),
      budget_runtime_ms: z
        .number()
        .nullable()
        .optional()
        .describe('Runtime budget in ms (null = none; 60000..2592000000).'),
      budget_messages: z.number().nullable().optional().describe('Delivered-message budget (null = none; 1..1000000).'),
      max_wakes_per_member: z
        .number()
        .nullable()
        .optional()
        .describe('Turns OpenComms may start for one member per hour (default 60; null = none; 0..100000).'),
      max_wakes_per_channel: z
        .number()
        .nullable()
        .optional()
        .describe('Turns OpenComms may start for the whole channel per hour (default 240; null = none; 0..100000).'),
      spawn_push: spawnPush.optional(),
    },
    required: ['channel', 'role', 'role_prompt'],
    bootstrap: true,
    command: (a, ctx) => ({ op: 'create', caller: ctx.caller(a.spawn_push === true), args: a }),
  }),
  tool({
    name: 'opencomms_join',
    description:
      'Join an existing channel under your own role. If the channel does not exist, STOP: do not create it; report to the operator.',
    shape: { channel, role, role_prompt: rolePrompt, spawn_push: spawnPush.optional() },
    required: ['channel', 'role', 'role_prompt'],
    bootstrap: true,
    command: (a, ctx) => ({ op: 'join', caller: ctx.caller(a.spawn_push === true), args: a }),
  }),
  tool({
    name: 'opencomms_send',
    linked: true,
    description:
      'Send a message to another member: `to` (session id or role), broadcast=true, or omit both on a 2-member channel. Use reply_to to answer a message (keeps its thread).',
    shape: {
      channel,
      content: z.string().describe('The message text (non-blank, at most 100000 chars).'),
      type: z.string().optional().describe('review_request, review_response or manual (default).'),
      reply_to: z.string().nullable().optional().describe('message_id you are answering.'),
      to: z.string().optional().describe("Recipient's session id or role."),
      broadcast: z.boolean().optional().describe('Send to every other member.'),
      session_description: z
        .string()
        .optional()
        .describe('A one-line description of the channel (kept only the first time).'),
    },
    required: ['channel', 'content'],
    command: (a, ctx) => ({ op: 'send', sid: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_status',
    description:
      'Your channels: members, their delivery state, pending mail, budgets, timer, receipts and recent errors.',
    shape: { channel: channel.optional() },
    required: [],
    command: (a, ctx) => ({ op: 'status', sid: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_inbox',
    linked: true,
    description: 'Preview your pending messages on a channel without consuming them. Use opencomms_pull to read them.',
    shape: { channel, limit: limit.optional() },
    required: ['channel'],
    command: (a, ctx) => ({ op: 'inbox', sid: ctx.pin, args: a, max_size: ctx.resultLimit }),
  }),
  tool({
    name: 'opencomms_pull',
    mcpOnly: true,
    description:
      'Read (and mark delivered) your pending messages: one channel, or all of yours when channel is omitted. Peer text is framed as untrusted data.',
    shape: { channel: channel.optional(), limit: limit.optional() },
    required: [],
    command: (a, ctx) => ({ op: 'pull', sid: ctx.pin, args: a, max_size: ctx.resultLimit }),
  }),
  tool({
    name: 'opencomms_history',
    description: 'Recent messages of a channel, newest first (content framed as untrusted data).',
    shape: { channel, limit: limit.optional() },
    required: ['channel'],
    command: (a, ctx) => ({ op: 'history', sid: ctx.pin, args: a, max_size: ctx.resultLimit }),
  }),
  tool({
    name: 'opencomms_update_role',
    linked: true,
    description: 'Replace your own role prompt on a channel.',
    shape: { channel, role_prompt: rolePrompt },
    required: ['channel', 'role_prompt'],
    command: (a, ctx) => ({ op: 'update_role', sid: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_pause',
    linked: true,
    description: 'Pause a channel: sends are refused and delivery is held until opencomms_resume.',
    shape: { channel },
    required: ['channel'],
    command: (a, ctx) => ({ op: 'pause', sid: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_resume',
    linked: true,
    description: 'Resume a paused channel; held mail is delivered.',
    shape: { channel },
    required: ['channel'],
    command: (a, ctx) => ({ op: 'resume', sid: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_disconnect',
    linked: true,
    description: 'Leave a channel (your pending mail there is dropped). No host session is touched.',
    shape: { channel },
    required: ['channel'],
    command: (a, ctx) => ({ op: 'disconnect', sid: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_kick',
    linked: true,
    description: 'Coordinator only: remove another member from a channel; the rest get a notice.',
    shape: {
      channel,
      target_session_id: z.string().optional().describe("The member's session id (tried first)."),
      target_role: z.string().optional().describe("The member's role."),
    },
    required: ['channel'],
    admin: true,
    command: (a, ctx) => ({ op: 'kick', caller: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_timer',
    linked: true,
    description:
      'Chess clock per channel: start, stop, switch (to=), reset, status, set_limit (limit_ms, to=), clear_limit. Advisory only.',
    shape: {
      channel,
      action: z.string().describe('start | stop | switch | reset | status | set_limit | clear_limit'),
      limit_ms: z.number().optional().describe('For set_limit: milliseconds > 0.'),
      to: z.string().optional().describe('Member (id or role) for switch / set_limit.'),
    },
    required: ['channel', 'action'],
    command: (a, ctx) => ({ op: 'timer', sid: ctx.pin, args: a }),
  }),
  tool({
    name: 'opencomms_save_session',
    description:
      'Archive a channel (messages, roster, summary) and close it; restore it later with opencomms_resume_session.',
    shape: {
      channel,
      summary: z.string().optional().describe('What was decided and what is open (at most 2000 chars).'),
    },
    required: ['channel'],
    command: (a, ctx) => ({ op: 'save_session', actor: ctx.actor, args: a }),
  }),
  tool({
    name: 'opencomms_resume_session',
    description:
      'Restore a saved channel (by name or archive id) as a new, empty channel linked to it; members then join it.',
    shape: {
      channel: z.string().describe('Saved channel name or archive id (chn_...).'),
      new_name: z.string().optional(),
    },
    required: ['channel'],
    bootstrap: true,
    command: (a, ctx) => ({ op: 'resume_session', actor: ctx.actor, args: a, archive: null }),
  }),
  tool({
    name: 'opencomms_delete_session',
    description:
      'Permanently delete a live channel (you must be a member) or a saved channel (you must be in its roster). Needs confirm=true.',
    shape: { channel: z.string(), confirm: z.boolean().describe('Must be true.') },
    required: ['channel', 'confirm'],
    bootstrap: true,
    command: (a, ctx) => ({ op: 'delete_session', actor: ctx.actor, args: a, archive: null }),
  }),
  tool({
    name: 'opencomms_archive',
    description:
      'Saved channels you were part of: mode=list (default), summary or messages (channel = name or archive id).',
    shape: {
      channel: z.string().optional(),
      mode: z.string().optional().describe('list | summary | messages'),
      limit: z.number().optional().describe('messages: how many (default 50, max 500).'),
    },
    required: [],
    bootstrap: true,
    command: (a, ctx) => ({ op: 'archive', actor: ctx.actor, args: a }),
  }),
];

/** The tools a host lists; `spawn_push` is an MCP-only argument. */
export function toolsFor(host: 'mcp' | 'opencode', admin = false): ToolDef[] {
  if (host === 'mcp') return TOOLS.filter((t) => !t.admin || admin);
  return TOOLS.filter((t) => !t.mcpOnly).map((t) => {
    if (!('spawn_push' in t.shape)) return t;
    const { spawn_push: _mcpOnly, ...shape } = t.shape;
    return { ...t, shape };
  });
}
