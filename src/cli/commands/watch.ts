// `opencomms watch [--channel NAME] [--json]` (operator.md "Command line"; like `kubectl get -w`): one
// line per envelope / recipient / member machine transition as it happens in any process, until
// Ctrl-C. `--json`: one JSON object per line, for scripts.
import { normaliseChannelName } from '../../engine/lookup.ts';
import type { SessionDetail } from '../../engine/operator.ts';
import { refuse, type Refusal, RefusalError } from '../../protocol/result.ts';
import type { CliCommand } from '../command.ts';
import { EXIT_OK, projectOf } from '../context.ts';
import { openRuntime, type Runtime } from '../../runtime/runtime.ts';

/** What `--channel` names now: a live channel, none yet (its lines appear once it is created), or
 *  a saved one, refused: nothing on it can move again (a restore makes a new channel). */
async function channelNow(rt: Runtime, channel: string): Promise<'live' | 'none'> {
  const r = await rt.run({ op: 'session_get', args: { channel } });
  if (!r.ok) {
    if (r.data?.reason === 'channel_not_found') return 'none';
    throw new RefusalError(r as Refusal);
  }
  if ((r.data as SessionDetail).kind === 'live') return 'live';
  throw new RefusalError(
    refuse(
      'lifecycle_refused',
      `"${channel}" is a saved channel, not a live one: nothing on it moves. Restore it (\`opencomms channel restore ${channel}\`) and watch the new one.`,
      { lifecycle: 'saved' },
    ),
  );
}

export const watch: CliCommand = {
  register(program, ctx) {
    program
      .command('watch')
      .description('print every delivery machine transition as it happens, in any process (Ctrl-C stops)')
      .option('--channel <name>', 'only this channel')
      .option('--json', 'one JSON object per line')
      .option(
        '--inspect [ws-url]',
        'also show every machine live in Stately Inspector: a page on 127.0.0.1, or a ws:// receiver on this computer',
      )
      .action(async (o: { channel?: string; json?: boolean; inspect?: string | true }, cmd) => {
        // main judged the name already (one answer for every command).
        const channel = o.channel === undefined ? undefined : (normaliseChannelName(o.channel) ?? undefined);
        const [{ renderLine }, { streamChanges }] = await Promise.all([
          import('../watch/diff.ts'),
          import('../watch/stream.ts'),
        ]);
        const project = projectOf(cmd);
        const rt = openRuntime(project, { log: (l) => ctx.io.err(`[opencomms] ${l}\n`) });
        let w;
        // Stately Inspector (docs/stately.md): fed from the same looks as the lines.
        let inspect: import('../../inspect/cli.ts').InspectTarget | null = null;
        let now: 'live' | 'none' = 'live';
        try {
          if (channel) now = await channelNow(rt, channel);
          if (o.inspect !== undefined)
            inspect = await (await import('../../inspect/cli.ts')).openInspectTarget(o.inspect);
          w = await streamChanges(rt.store, {
            channel,
            onLook: inspect?.feed(channel),
            log: (l) => ctx.io.err(`[opencomms] ${l}\n`),
            onLines: (lines) =>
              ctx.io.out(`${lines.map((l) => (o.json ? JSON.stringify(l) : renderLine(l))).join('\n')}\n`),
          });
        } catch (e) {
          await inspect?.close();
          await rt.close();
          throw e; // main answers it: one line, or the --json document
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
        const which = !channel
          ? ''
          : now === 'live'
            ? ` (channel ${channel})`
            : ` (channel ${channel}, which does not exist yet: its lines start when it is created; \`opencomms channel list\` lists the channels there are)`;
        if (inspect)
          ctx.io.err(`Stately Inspector: ${inspect.url} (no message content, role prompt or session id is sent)\n`);
        ctx.io.err(`Watching ${project}${which}; Ctrl-C stops.\n`);
        await stopped;
        await w.close();
        await inspect?.close();
        await rt.close();
        ctx.exit(EXIT_OK);
      });
  },
};
