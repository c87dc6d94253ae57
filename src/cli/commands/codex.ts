// `opencomms codex [codex args…]`: Codex's own TUI, run through the launcher that wakes it when
// OpenComms mail arrives (adapters/codex/launcher.ts, docs/codex-wake.md). Every argument after
// `codex` is Codex's, passed on unchanged.
import { appendFileSync } from 'node:fs';
import type { CliCommand } from '../command.ts';
import { projectOf } from '../context.ts';

/** How long the process may take to end by itself once Codex has exited and all is closed. */
const EXIT_GRACE_MS = 500;

export const codexCommand: CliCommand = {
  register(program, ctx) {
    program
      .command('codex')
      .description('run the Codex TUI so that OpenComms mail wakes it (arguments go to codex)')
      .argument('[codex-args...]', 'passed to codex unchanged')
      .allowUnknownOption()
      .helpOption(false)
      .action(async (args: string[], _o, cmd) => {
        const { launchCodex } = await import('../../../adapters/codex/launcher.ts');
        const file = process.env.OPENCOMMS_LAUNCHER_LOG;
        const log = file
          ? (line: string) => appendFileSync(file, `${new Date().toISOString()} launcher ${process.pid}: ${line}\n`)
          : () => {};
        const codex = process.env.OPENCOMMS_CODEX_BIN || 'codex';
        const code = await launchCodex({ project: projectOf(cmd), args, codex, env: process.env, log });
        ctx.exit(code);
        // Codex's background server, when this Codex started it, inherits the pseudo-terminal and
        // may keep it open: the launcher ends with Codex all the same.
        setTimeout(() => process.exit(code), EXIT_GRACE_MS).unref();
      });
  },
};
