// `opencomms mcp [--host LABEL] [--admin]` (protocol.md "MCP server and wire"): the MCP stdio server for one member.
// Its member is OPENCOMMS_MEMBER_ID, else OPENCOMMS_PINNED_MEMBER_ID (adapters/mcp/server.ts memberIdFromEnv).
import type { CliCommand } from '../command.ts';
import { projectOf } from '../context.ts';

export const mcp: CliCommand = {
  register(program, ctx) {
    program
      .command('mcp')
      .description(
        'the MCP stdio server for one member (identity from OPENCOMMS_MEMBER_ID, else OPENCOMMS_PINNED_MEMBER_ID)',
      )
      .option('--host <label>', 'host label of the members it creates (default mcp)')
      .option('--admin', 'also offer opencomms_kick')
      .action(async (o: { host?: string; admin?: boolean }, cmd) => {
        const { runMcpServer } = await import('../../../adapters/mcp/server.ts');
        ctx.exit(await runMcpServer({ project: projectOf(cmd), host: o.host, admin: o.admin === true }));
      });
  },
};
