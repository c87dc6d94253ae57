// File names of the bundles an installer writes into `<project>/.opencomms/` (no imports: the hook
// runner reads them on every prompt).
export const HOOK_RUNNER = 'claude-code-hooks.mjs';
/** The runner's full path, imported by the runner only when a hook has work. */
export const HOOK_RUNNER_FULL = 'claude-code-hooks-full.mjs';
export const MCP_BUNDLE = 'opencomms-mcp.mjs';
