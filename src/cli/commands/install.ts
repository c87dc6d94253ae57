// `opencomms install <host>` (FEATURES.md §6.7, §8.1). Hosts are added here as their installers land.
import type { ToolResult } from '../../protocol/result.ts';
import type { CliCommand } from '../command.ts';
import { answer, EXIT_FAIL, projectOf } from '../context.ts';

const INSTALLERS: Record<string, (project: string, warn: (l: string) => void) => Promise<ToolResult>> = {
  opencode: async (project, warn) => (await import('../../../adapters/opencode/install.ts')).installOpenCode(project, warn),
};

export const install: CliCommand = {
  register(program, ctx) {
    program
      .command('install <host>')
      .description(`install the integration for a host (${Object.keys(INSTALLERS).join(', ')})`)
      .option('--json', 'one {ok, message, data} document')
      .action(async (host: string, o: { json?: boolean }, cmd) => {
        const run = INSTALLERS[host];
        if (!run) {
          ctx.io.err(`opencomms: install supports: ${Object.keys(INSTALLERS).join(', ')} (not "${host}").\n`);
          return ctx.exit(EXIT_FAIL);
        }
        const r = await run(projectOf(cmd), (l) => ctx.io.err(`warning: ${l}\n`));
        ctx.exit(answer(ctx.io, r, o.json, () => r.message));
      });
  },
};
