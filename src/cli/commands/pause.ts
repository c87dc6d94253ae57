// `opencomms pause <channel>` / `opencomms resume <channel>`: the operator stops a runaway exchange
// without an agent's help, and lets it go again. The same engine operation as the members'
// opencomms_pause / opencomms_resume tools (the channel machine, the same refusals), as the
// operator: any live channel of the project, no roster needed.
import type { CliCommand } from '../command.ts';
import { answer, projectOf, withRuntime } from '../context.ts';

export const pauseCommands: CliCommand = {
  register(program, ctx) {
    for (const [op, what] of [
      ['pause', 'hold delivery on a channel: sends are refused, queued mail waits'],
      ['resume', 'release a paused channel: held mail is delivered'],
    ] as const)
      program
        .command(`${op} <channel>`)
        .description(what)
        .option('--json', 'one {ok, message, data} document')
        .action(async (channel: string, o: { json?: boolean }, cmd) => {
          const r = await withRuntime(projectOf(cmd), (rt) =>
            rt.run({ op, sid: { operator: true }, args: { channel } }),
          );
          ctx.exit(answer(ctx.io, r, o.json, () => r.message));
        });
  },
};
