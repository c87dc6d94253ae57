// What each host shows its model whole, route by route (docs/hosts.md "What each route shows whole"):
// the measured figures that bound every hand-over (protocol.md "Route limits"). Host-specific, so
// here and not in src/protocol (which names no host).
import { DEFAULT_ROUTE_LIMIT, type RouteName } from '../src/protocol/limits.ts';

/** Measured per host on the real binaries (docs/hosts.md "What each route shows whole", each bracketed
 *  at N whole / N+1 not, with ASCII and 2-, 3- and 4-byte text):
 *  - Claude Code 2.1.332: a hook's additionalContext 10,000 UTF-16 units (beyond: moved to a file, a
 *    2 KB preview shown); a wake's stderr 100,867 units (beyond: its middle cut); an MCP tool result
 *    50,000 units (beyond: moved to a file).
 *  - Codex 0.171.0: a hook's additionalContext 10,000 UTF-8 bytes (beyond: head and tail kept, the
 *    whole saved under $TMPDIR); an MCP tool result 11,964 bytes (beyond: its middle cut).
 *  - OpenCode 1.18.33: a pushed turn showed 1,000,000 characters whole (no limit found); a tool result
 *    2,000 lines and 51,200 UTF-8 bytes (beyond: cut, and a JSON answer is one line, so nothing shown).
 *    Its plugin has no pull tool; an MCP server it runs (`--host opencode`) answers within it.
 *  Each limit is at or below the largest size seen whole. */
export const ROUTE_LIMITS: Readonly<Record<string, Readonly<Partial<Record<RouteName, number>>>>> = {
  'claude-code': { hook_context: 10_000, wake: 100_000, tool_result: 50_000 },
  codex: { hook_context: 10_000, tool_result: 11_900 },
  opencode: { push: 1_000_000, tool_result: 51_000 },
};

/** The limit of `route` on `host`; a host or route not measured gets DEFAULT_ROUTE_LIMIT. */
export function routeLimit(host: string, route: RouteName): number {
  return ROUTE_LIMITS[host]?.[route] ?? DEFAULT_ROUTE_LIMIT;
}
