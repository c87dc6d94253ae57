// Request params checked against the schema of the method this server handles, before the SDK
// sees them (protocol.md "MCP server and wire": a wrong JSON type is -32602). The SDK parses params inside its
// handler wrapper and answers a failure with -32603 Internal error and a dump of the zod issues:
// that is neither the contract's code nor a message an agent can act on.
import {
  CallToolRequestSchema,
  ErrorCode,
  InitializeRequestSchema,
  ListToolsRequestSchema,
  PingRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** The requests this server answers; any other method is the SDK's -32601. */
const HANDLED = new Map<
  string,
  { safeParse(v: unknown): { success: boolean; error?: { issues: Array<{ path: PropertyKey[]; message: string }> } } }
>(
  [InitializeRequestSchema, PingRequestSchema, ListToolsRequestSchema, CallToolRequestSchema].map((s) => [
    s.shape.method.value,
    s,
  ]),
);

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The shape every tool call of an MCP client has (a name, maybe arguments, nothing else): it
 *  passes the schema, so the schema is parsed only for anything else. A call is on the hot path;
 *  the SDK parses the request once more itself. */
function plainToolCall(m: { method: string; params?: unknown }): boolean {
  if (m.method !== 'tools/call' || !isPlainObject(m.params)) return false;
  const { name, arguments: args, ...rest } = m.params;
  return typeof name === 'string' && (args === undefined || isPlainObject(args)) && Object.keys(rest).length === 0;
}

/** The -32602 answer for a request whose params its method's schema refuses, or null. */
export function invalidParams(m: JSONRPCMessage): JSONRPCMessage | null {
  if (!('method' in m) || !('id' in m)) return null; // notifications and responses get no answer
  if (plainToolCall(m)) return null;
  const schema = HANDLED.get(m.method);
  if (!schema) return null;
  const r = schema.safeParse({ method: m.method, params: m.params });
  if (r.success) return null;
  const issue = r.error!.issues[0]!;
  return {
    jsonrpc: '2.0',
    id: m.id,
    error: {
      code: ErrorCode.InvalidParams,
      message: `Invalid params for ${m.method}: ${issue.path.map(String).join('.') || '(params)'}: ${issue.message}`,
    },
  };
}
