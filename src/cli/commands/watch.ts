// `opencomms watch [--channel NAME] [--json]` (operator.md "Command line"; like `kubectl get -w`): one
// line per envelope / recipient / member machine transition as it happens in any process, until
// Ctrl-C. `--json`: one JSON object per line, for scripts.
import { normaliseChannelName } from '../../engine/lookup.ts';
import type { CliCommand } from '../command.ts';
import { EXIT_FAIL, EXIT_OK, projectOf } from '../context.ts';
import { openRuntime } from '../../runtime/runtime.ts';

export const watch: CliCommand = {
  register(program, ctx) {
    program
      .command('watch')
      .description('print every delivery machine transition as it happens, in any process (Ctrl-C stops)')
      .option('--channel <name>', 'only this channel')
      .option('--json', 'one JSON object per line')
      .action(async (o: { channel?: string; json?: boolean }, cmd) => {
        const channel = o.channel === undefined ? undefined : normaliseChannelName(o.channel);
        if (channel === null) {
          ctx.io.err(`opencomms: "${o.channel}" is not a channel name (lowercase letters, digits, "-", "_").\n`);
          return ctx.exit(EXIT_FAIL);
        }
        const [{ renderLine }, { streamChanges }] = await Promise.all([
          import('../watch/diff.ts'),
          import('../watch/stream.ts'),
        ]);
        const project = projectOf(cmd);
        const rt = openRuntime(project, { log: (l) => ctx.io.err(`[opencomms] ${l}\n`) });
        let w;
        try {
          w = await streamChanges(rt.store, {
            channel,
            log: (l) => ctx.io.err(`[opencomms] ${l}\n`),
            onLines: (lines) =>
              ctx.io.out(`${lines.map((l) => (o.json ? JSON.stringify(l) : renderLine(l))).join('\n')}\n`),
          });
        } catch (e) {
          await rt.close();
          ctx.io.err(`opencomms: ${(e as Error).message}\n`);
          return ctx.exit(EXIT_FAIL);
        }
        // The signal handlers come before the ready line: whoever reads it may stop us at once.
        const stopped = new Promise<void>((resolve) => {
          const alive = setInterval(() => {}, 2 ** 30); // the subscription itself holds no reference that keeps Node running
          for (const sig of ['SIGINT', 'SIGTERM'] as const)
            process.once(sig, () => {
              clearInterval(alive);
              resolve();
            });
        });
        ctx.io.err(`Watching ${project}${channel ? ` (channel ${channel})` : ''}; Ctrl-C stops.\n`);
        await stopped;
        await w.close();
        await rt.close();
        ctx.exit(EXIT_OK);
      });
  },
};
