// The MCP server as a program of its own (protocol.md "MCP server and wire"):
//   node opencomms-mcp.mjs <project-dir> [--host LABEL] [--admin]   (or --project <dir>; --help)
// It is the self-contained bundle an installer copies into `.opencomms/`, and what
// `opencomms mcp [--project DIR]` runs: hosts start one per session, so it loads nothing else.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { existingDir } from '../../src/cli/project-dir.ts';
import { RefusalError } from '../../src/protocol/result.ts';
import { runMcpServer } from './server.ts';

export const MCP_USAGE = `Usage: opencomms mcp [--project <dir> | <dir>] [--host <label>] [--admin]

The MCP stdio server of one member: JSON-RPC on stdin and stdout, diagnostics on stderr.
  --project <dir>  the project (an existing directory; default: the current directory)
  --host <label>   host label of the members it creates (default mcp)
  --admin          also offer opencomms_kick
  -h, --help       this text
The member is OPENCOMMS_MEMBER_ID (else OPENCOMMS_PINNED_MEMBER_ID); OPENCOMMS_PROJECT_ID names the
project id its members record (default local-project).
`;

export async function mcpMain(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        project: { type: 'string' },
        host: { type: 'string' },
        admin: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    // node's own text goes on to explain `--`; the first sentence says what is wrong.
    const what = (e as Error).message.split(/\. /)[0]!.replace(/\.$/, '');
    process.stderr.write(
      `[opencomms-mcp] refusing to start (usage_error): ${what}. Run \`opencomms mcp --help\` for its usage.\n`,
    );
    return 1;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(MCP_USAGE);
    return 0;
  }
  let project: string;
  try {
    project = existingDir(resolve(values.project ?? positionals[0] ?? process.cwd()));
  } catch (e) {
    if (!(e instanceof RefusalError)) throw e;
    // One line, before any JSON-RPC: the host shows it as the server's failure to start.
    process.stderr.write(`[opencomms-mcp] refusing to start (${e.refusal.data!.reason}): ${e.refusal.message}\n`);
    return 1;
  }
  return runMcpServer({ project, host: values.host, admin: values.admin === true });
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href)
  process.exitCode = await mcpMain(process.argv.slice(2));
