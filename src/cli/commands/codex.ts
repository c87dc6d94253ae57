// `opencomms codex [codex args…]`: Codex's own TUI, run through the launcher that wakes it when
// OpenComms mail arrives (adapters/codex/launcher.ts, docs/codex-wake.md). Every argument after
// `codex` is Codex's, passed on unchanged.
import { accessSync, appendFileSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { refuse, RefusalError } from '../../protocol/result.ts';
import type { CliCommand } from '../command.ts';
import { projectOf } from '../context.ts';

const runnable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
};

/** The Codex binary the launcher will run, found as execvp finds it, or the refusal that says
 *  where it was looked for (the pseudo-terminal's own error names only execvp). */
export function codexBinary(env: NodeJS.ProcessEnv = process.env): string {
  const named = env.OPENCOMMS_CODEX_BIN;
  if (named) {
    if (named.includes('/') ? runnable(named) : onPath(named, env)) return named;
    throw new RefusalError(
      refuse(
        'host_not_found',
        `OPENCOMMS_CODEX_BIN names ${named}, which is not an executable file: point it at the codex binary, or unset it to use the codex on the PATH.`,
      ),
    );
  }
  if (onPath('codex', env)) return 'codex';
  throw new RefusalError(
    refuse(
      'host_not_found',
      'Codex is not on the PATH (no executable `codex` in any of its directories): install Codex (`npm install -g @openai/codex`), or name its binary in OPENCOMMS_CODEX_BIN.',
    ),
  );
}

const onPath = (bin: string, env: NodeJS.ProcessEnv) =>
  (env.PATH ?? '')
    .split(delimiter)
    .filter(Boolean)
    .some((d) =>
      (process.platform === 'win32' ? ['', '.exe', '.cmd'] : ['']).some((ext) => runnable(join(d, `${bin}${ext}`))),
    );

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
        const project = projectOf(cmd);
        const codex = codexBinary();
        const { launchCodex } = await import('../../../adapters/codex/launcher.ts');
        const file = process.env.OPENCOMMS_LAUNCHER_LOG;
        const log = file
          ? (line: string) => appendFileSync(file, `${new Date().toISOString()} launcher ${process.pid}: ${line}\n`)
          : () => {};
        const code = await launchCodex({ project, args, codex, env: process.env, log });
        ctx.exit(code);
        // Codex's background server, when this Codex started it, inherits the pseudo-terminal and
        // may keep it open: the launcher ends with Codex all the same.
        setTimeout(() => process.exit(code), EXIT_GRACE_MS).unref();
      });
  },
};
