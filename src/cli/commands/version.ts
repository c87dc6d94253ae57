// `opencomms version [--json]` (operator.md "Command line").
import { ok } from '../../protocol/result.ts';
import { SCHEMA_VERSION } from '../../protocol/limits.ts';
import { VERSION } from '../../version.ts';
import type { CliCommand } from '../command.ts';
import { answer } from '../context.ts';

export const version: CliCommand = {
  register(program, ctx) {
    program
      .command('version')
      .description('version and state schema')
      .option('--json', 'one {ok, message, data} document')
      .action((o: { json?: boolean }) => {
        const r = ok(`opencomms ${VERSION} (state schema v${SCHEMA_VERSION})`, {
          version: VERSION,
          schema: SCHEMA_VERSION,
        });
        ctx.exit(answer(ctx.io, r, o.json, () => r.message));
      });
  },
};
