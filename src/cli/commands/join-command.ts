// `opencomms join-command <channel> [--host H] [--role R] [--json]` (alias `join`; operator.md "Command line",
// operator.md "Command line"): what to paste into a host so its host session joins <channel>, which must be live.
import {
  DEFAULT_JOIN_HOST,
  JOIN_HOSTS,
  joinCommandResult,
  renderJoinCommand,
} from '../../../adapters/join-commands.ts';
import type { SessionDetail } from '../../engine/operator.ts';
import { refuse } from '../../protocol/result.ts';
import type { CliCommand } from '../command.ts';
import { answer, projectOf, withRuntime } from '../context.ts';

export const joinCommandCli: CliCommand = {
  register(program, ctx) {
    program
      .command('join-command <channel>')
      .alias('join')
      .description('the command that makes a host session join <channel>')
      .option('--host <host>', `${JOIN_HOSTS.join(' | ')}`, DEFAULT_JOIN_HOST)
      .option('--role <role>', 'the role the joining agent takes (default: a <role> placeholder)')
      .option('--json', 'one {ok, message, data} document')
      .action(async (name: string, o: { host: string; role?: string; json?: boolean }, cmd) => {
        const live = await withRuntime(projectOf(cmd), (rt) => rt.run({ op: 'session_get', args: { channel: name } }));
        const r = !live.ok
          ? live
          : (live.data as SessionDetail).kind !== 'live'
            ? refuse(
                'lifecycle_refused',
                `"${name}" is saved: restore it first (\`opencomms channel restore ${name}\`), then join the new channel.`,
                { lifecycle: 'saved' },
              )
            : joinCommandResult((live.data as SessionDetail).name, o.host, o.role);
        ctx.exit(answer(ctx.io, r, o.json, renderJoinCommand));
      });
  },
};
