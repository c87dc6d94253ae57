// Entry of the installed MCP server bundle: `node .opencomms/opencomms-mcp.mjs <project-dir>
// [--host LABEL] [--admin]` (FEATURES.md §7.1), the same server as `opencomms mcp`.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { runMcpServer } from './server.ts';

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  allowPositionals: true,
  strict: true,
  options: { host: { type: 'string' }, admin: { type: 'boolean' } },
});
process.exitCode = await runMcpServer({ project: resolve(positionals[0] ?? process.cwd()), host: values.host, admin: values.admin === true });
