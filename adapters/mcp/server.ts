// `opencomms mcp`: one stdio MCP server serving exactly ONE pinned member (FEATURES.md §7).
// McpServer lists the tools from their zod shapes; tools/call is answered by our own handler so
// that a missing or mistyped argument is a JSON-RPC -32602, not an isError result.
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallToolRequestSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import { HOST_LABEL_RE, MEMBER_ID_RE } from '../../src/protocol/ids.ts';
import { refuse, type ToolResult } from '../../src/protocol/result.ts';
import { channelNamed, onLiveRoster } from '../../src/engine/lookup.ts';
import { VERSION } from '../../src/version.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { spawnDriver } from '../spawn.ts';
import { toolsFor, type ToolContext, type ToolDef } from '../tools.ts';
import { LineLimitedStdioTransport } from './transport.ts';

const log = (line: string) => process.stderr.write(`[opencomms-mcp] ${line}\n`);

export interface McpOptions {
  project: string;
  host?: string;
  admin?: boolean;
  env?: NodeJS.ProcessEnv;
}

/** A pin is the member id this process serves; blank or malformed counts as none. */
export function readPin(env: NodeJS.ProcessEnv): string | null {
  const raw = env.OPENCOMMS_MEMBER_ID?.trim() ?? '';
  return raw && MEMBER_ID_RE.test(raw) ? raw : null;
}

const normalisedDir = (dir: string) => {
  try {
    return realpathSync(resolve(dir));
  } catch {
    return resolve(dir);
  }
};

export const asToolResult = (r: ToolResult) => ({ content: [{ type: 'text' as const, text: JSON.stringify(r) }], isError: !r.ok });

export function buildServer(rt: Runtime, opts: Required<Pick<McpOptions, 'host' | 'admin'>> & { pin: string | null; project: string; projectId: string }) {
  const server = new McpServer({ name: 'opencomms', version: VERSION }, { capabilities: { tools: {} } });
  const tools = toolsFor('mcp', opts.admin);
  for (const t of tools) server.registerTool(t.name, { description: t.description, inputSchema: t.shape }, async () => ({ content: [] }));
  const byName = new Map(tools.map((t) => [t.name, { def: t, schema: z.object(t.shape) }]));
  const worktree = normalisedDir(opts.project);
  const ctx = (pin: string): ToolContext => ({
    pin,
    caller: (spawnPush) => ({
      session_id: pin,
      host: opts.host,
      surface: 'mcp',
      delivery_mode: spawnPush ? 'spawn_push' : 'pull',
      host_session_id: null,
      project_id: opts.projectId,
      worktree,
    }),
    actor: { sid: pin, project_id: opts.projectId, worktree },
  });

  server.server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const found = byName.get(req.params.name);
    if (!found) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
    const tool = found.def;
    const args = validate(tool, found.schema, req.params.arguments ?? {});
    try {
      return asToolResult(await call(rt, tool, args, opts.pin, ctx));
    } catch (e) {
      log(`internal error in ${tool.name}: ${(e as Error).stack ?? e}`);
      throw new McpError(ErrorCode.InternalError, 'Internal error (details on the server log).');
    }
  });
  return server;
}

/** Required arguments (`key in args`) and JSON types, checked before anything runs. */
function validate(tool: ToolDef, schema: z.ZodType, raw: Record<string, unknown>): Record<string, unknown> {
  const missing = tool.required.filter((k) => !(k in raw));
  if (missing.length) throw new McpError(ErrorCode.InvalidParams, `Missing required argument(s) for ${tool.name}: ${missing.join(', ')}`);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new McpError(ErrorCode.InvalidParams, `Invalid argument ${i.path.join('.') || '(arguments)'} for ${tool.name}: ${i.message}`);
  }
  return parsed.data as Record<string, unknown>; // unknown keys (any identity-like ones included) are dropped, never obeyed
}

/** The identity gate of §7.2, then the engine. */
async function call(rt: Runtime, tool: ToolDef, args: Record<string, unknown>, pin: string | null, ctx: (pin: string) => ToolContext): Promise<ToolResult> {
  if (!pin)
    return refuse('identity_unpinned', 'This MCP server has no member identity (OPENCOMMS_MEMBER_ID is unset, blank or malformed). The operator must set it in this server\'s config; arguments can never supply an identity.');
  // delete_session is roster-free only for a saved session (it checks the archived roster); on a
  // live channel it is gated like every other tool (§7.2).
  if (!tool.bootstrap || tool.name === 'opencomms_delete_session') {
    const state = await rt.peek();
    const live = onLiveRoster(state, pin);
    const ch = channelNamed(state, args.channel);
    const tombstone = ch !== undefined && ch.lifecycle !== 'active';
    const archiveOnly = tool.bootstrap === true && ch?.lifecycle !== 'active';
    if (!live && !tombstone && !archiveOnly)
      return refuse('identity_not_member', 'Your pinned member id is on no channel roster (kicked, disconnected or reset). Join a channel again with opencomms_join.');
  }
  return rt.run(tool.command(args, ctx(pin)));
}

export async function runMcpServer(o: McpOptions): Promise<number> {
  const env = o.env ?? process.env;
  const host = o.host ?? 'mcp';
  if (!HOST_LABEL_RE.test(host) || host === 'generic') {
    log(`refusing to start: --host "${host}" is not a valid host label (lowercase, letter first, not "generic")`);
    return 1;
  }
  const pin = readPin(env);
  const projectId = env.OPENCOMMS_PROJECT_ID?.trim() || 'local-project';
  // Spawn delivery runs for this instance's own sends and their re-drains (§7.1, §8.4).
  const spawn = spawnDriver(o.project, env);
  const rt = openRuntime(o.project, { log, spawn });
  await rt.start();
  log(`start: pin set ${pin ? 'yes' : 'NO'}, host ${host}, admin ${o.admin ? 'yes' : 'no'}, spawn ${spawn.enabled ? 'on' : 'off'}, project ${o.project}`);
  const server = buildServer(rt, { host, admin: o.admin === true, pin, project: o.project, projectId });
  const transport = new LineLimitedStdioTransport(process.stdin, process.stdout, { onLog: log });
  const closed = new Promise<void>((res) => {
    transport.onclose = () => res();
  });
  await server.connect(transport);
  await closed;
  await rt.close();
  return 0;
}
