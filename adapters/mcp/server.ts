// `opencomms mcp`: one stdio MCP server serving exactly ONE pinned member (protocol.md "MCP server and wire").
// McpServer lists the tools from their zod shapes; tools/call is answered by our own handler so
// that a missing or mistyped argument is a JSON-RPC -32602, not an isError result.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallToolRequestSchema, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { HOST_LABEL_RE, MEMBER_ID_RE } from '../../src/protocol/ids.ts';
import { routeLimit } from '../route-limits.ts';
import { refuse, type ToolResult } from '../../src/protocol/result.ts';
import { channelNamed } from '../../src/engine/lookup.ts';
import type { State } from '../../src/protocol/schema.ts';
import { rosterGate } from '../../src/runtime/gates.ts';
import { VERSION } from '../../src/version.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { normaliseWorktree } from '../../src/runtime/worktree.ts';
import { spawnDriver } from '../spawn.ts';
import { toolsFor, type Prepared, type ToolContext, type ToolDef } from '../tools.ts';
import { invalidParams } from './params.ts';
import { LineLimitedStdioTransport } from './transport.ts';

const log = (line: string) => process.stderr.write(`[opencomms-mcp] ${line}\n`);

export interface McpOptions {
  project: string;
  host?: string;
  admin?: boolean;
  env?: NodeJS.ProcessEnv;
}

/** A pin is the member id this process serves: the session's OPENCOMMS_MEMBER_ID, else the one an
 *  installer names in OPENCOMMS_PINNED_MEMBER_ID (a host that cannot default one variable to
 *  another); blank or malformed counts as none. */
export function memberIdFromEnv(env: NodeJS.ProcessEnv): string | null {
  const raw = env.OPENCOMMS_MEMBER_ID?.trim() || env.OPENCOMMS_PINNED_MEMBER_ID?.trim() || '';
  return raw && MEMBER_ID_RE.test(raw) ? raw : null;
}

export const asToolResult = (r: ToolResult) => ({
  content: [{ type: 'text' as const, text: JSON.stringify(r) }],
  isError: !r.ok,
});

export function buildServer(
  rt: Runtime,
  opts: Required<Pick<McpOptions, 'host' | 'admin'>> & { pin: string | null; project: string; projectId: string },
  ready: Promise<void> = Promise.resolve(),
) {
  const server = new McpServer({ name: 'opencomms', version: VERSION }, { capabilities: { tools: {} } });
  const tools = toolsFor('mcp', opts.admin);
  for (const t of tools)
    server.registerTool(t.name, { description: t.description, inputSchema: t.shape }, async () => ({ content: [] }));
  const byName = new Map(tools.map((t) => [t.name, t]));
  const worktree = normaliseWorktree(opts.project);
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
    resultLimit: routeLimit(opts.host, 'tool_result'),
  });

  server.server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const tool = byName.get(req.params.name);
    if (!tool) throw invalidParamsError(`Unknown tool: ${req.params.name}`);
    const prepared = validate(tool, req.params.arguments ?? {});
    await ready;
    return asToolResult(await call(rt, tool, prepared, opts.pin, ctx));
  });
  return server;
}

/** A -32602 whose wire message is the problem alone: an McpError's message starts "MCP error
 *  -32602: ", which the SDK puts on the wire and a client's McpError then prefixes once more. */
const invalidParamsError = (message: string) => Object.assign(new Error(message), { code: ErrorCode.InvalidParams });

/** Required arguments (`key in args`) and JSON types, checked before anything runs. */
function validate(tool: ToolDef, raw: Record<string, unknown>): Extract<Prepared, { ok: true }> {
  const missing = tool.required.filter((k) => !(k in raw));
  if (missing.length) throw invalidParamsError(`Missing required argument(s) for ${tool.name}: ${missing.join(', ')}`);
  const prepared = tool.prepare(raw);
  if (!prepared.ok) throw invalidParamsError(prepared.problem);
  return prepared;
}

const identityNotMember = () =>
  refuse(
    'identity_not_member',
    'Your pinned member id is on no channel roster (kicked, disconnected or reset). Join a channel again with opencomms_join.',
  );

/** The identity gate (protocol.md "Result shape"), then the engine. */
async function call(
  rt: Runtime,
  tool: ToolDef,
  prepared: Extract<Prepared, { ok: true }>,
  pin: string | null,
  ctx: (pin: string) => ToolContext,
): Promise<ToolResult> {
  const { args } = prepared;
  if (!pin)
    return refuse(
      'identity_unpinned',
      "This MCP server has no member identity (OPENCOMMS_MEMBER_ID is unset, blank or malformed). The operator must set it in this server's config; arguments can never supply an identity.",
    );
  // Bootstrap tools need no live roster; delete_session is one only for a saved channel (it
  // checks the archived roster): on a live channel it is gated like every other tool.
  const gate = (state: Readonly<State>) => {
    if (
      tool.bootstrap &&
      (tool.name !== 'opencomms_delete_session' || channelNamed(state, args.channel)?.lifecycle !== 'active')
    )
      return null;
    return rosterGate(state, pin, args.channel, identityNotMember);
  };
  return rt.run(prepared.command(ctx(pin)), gate);
}

export async function runMcpServer(o: McpOptions): Promise<number> {
  const env = o.env ?? process.env;
  const host = o.host ?? 'mcp';
  if (!HOST_LABEL_RE.test(host) || host === 'generic') {
    log(
      `refusing to start (invalid_argument): --host "${host}" is not a valid host label (lowercase, letter first, not "generic")`,
    );
    return 1;
  }
  const pin = memberIdFromEnv(env);
  const projectId = env.OPENCOMMS_PROJECT_ID?.trim() || 'local-project';
  // Spawn delivery runs for this instance's own sends and their re-drains (protocol.md "MCP server and wire"; hosts.md "spawn_push").
  const spawn = spawnDriver(o.project, env);
  const rt = openRuntime(o.project, { log, spawn, catchUpWhileIdle: true });
  // The start-up sweep runs while the client initializes and lists tools; calls wait for it.
  const started = rt.start();
  log(
    `start: pin set ${pin ? 'yes' : 'NO'}, host ${host}, admin ${o.admin ? 'yes' : 'no'}, spawn ${spawn.enabled ? 'on' : 'off'}, project ${o.project}`,
  );
  const server = buildServer(rt, { host, admin: o.admin === true, pin, project: o.project, projectId }, started);
  const transport = new LineLimitedStdioTransport(process.stdin, process.stdout, { onLog: log });
  const closed = new Promise<void>((res) => {
    transport.onclose = () => res();
  });
  await server.connect(transport);
  const handle = transport.onmessage!;
  transport.onmessage = (m) => {
    const refusal = invalidParams(m);
    if (refusal) void transport.send(refusal).catch((e: Error) => log(`could not answer invalid params: ${e.message}`));
    else handle(m);
  };
  await closed;
  await rt.close();
  return 0;
}
