// The MCP server as a program of its own (protocol.md "MCP server and wire"):
//   node opencomms-mcp.mjs <project-dir> [--host LABEL] [--admin]
// It is the self-contained bundle an installer copies into `.opencomms/`, and what
// `opencomms mcp [--project DIR]` runs: hosts start one per session, so it loads nothing else.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { runMcpServer } from './server.ts';

export async function mcpMain(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { project: { type: 'string' }, host: { type: 'string' }, admin: { type: 'boolean' } },
    });
  } catch (e) {
    process.stderr.write(
      `[opencomms-mcp] ${(e as Error).message}\nUsage: opencomms-mcp <project-dir> [--host LABEL] [--admin]\n`,
    );
    return 1;
  }
  const { values, positionals } = parsed;
  const project = resolve(values.project ?? positionals[0] ?? process.cwd());
  return runMcpServer({ project, host: values.host, admin: values.admin === true });
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href)
  process.exitCode = await mcpMain(process.argv.slice(2));
