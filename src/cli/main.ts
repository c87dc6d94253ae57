// The `opencomms` command: commander parses (subcommands, generated help, `--project` anywhere),
// the registry supplies the commands. Every refusal is a message and exit code 1, never a stack trace.
import { Command, CommanderError } from 'commander';
import { refuse, RefusalError } from '../protocol/result.ts';
import { VERSION } from '../version.ts';
import { answer, EXIT_FAIL, EXIT_OK, processIo, type CliContext, type Io } from './context.ts';
import { COMMANDS } from './registry.ts';

const HELP_HINT = 'Run `opencomms help` for the list of commands.';

export function buildProgram(ctx: CliContext): Command {
  const program = new Command('opencomms')
    .description(`OpenComms ${VERSION}: messaging between AI coding sessions in one project`)
    .option('--project <dir>', 'the project directory (default: the current directory); allowed anywhere on the line')
    .helpCommand('help [command]', 'usage of opencomms or of one command')
    .exitOverride()
    .configureOutput({ writeOut: (s) => ctx.io.out(s), writeErr: (s) => ctx.io.err(s) })
    .showHelpAfterError(HELP_HINT)
    .showSuggestionAfterError(true);
  for (const c of COMMANDS) c.register(program, ctx);
  // Subcommands inherit the same output, error and help handling.
  for (const sub of program.commands) inherit(sub, program);
  return program;
}

function inherit(cmd: Command, from: Command) {
  cmd.exitOverride().configureOutput(from.configureOutput()).showHelpAfterError(HELP_HINT);
  for (const sub of cmd.commands) inherit(sub, from);
}

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  let code = EXIT_OK;
  const ctx: CliContext = { io, exit: (c) => void (code = c) };
  const program = buildProgram(ctx);
  if (argv.length === 0) {
    program.outputHelp();
    return EXIT_OK;
  }
  // Whoever asked for `--json` reads stdout as one document, refusals and usage errors included.
  const json = argv.includes('--json');
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof RefusalError) return answer(io, e.refusal, json, () => '');
    // Usage errors were already printed by commander on stderr (naming the command or option, plus the hint).
    if (e instanceof CommanderError) {
      if (e.exitCode !== 0 && json)
        io.out(`${JSON.stringify(refuse('usage_error', `${e.message.replace(/^error: /, '')}. ${HELP_HINT}`))}\n`);
      return e.exitCode === 0 ? EXIT_OK : EXIT_FAIL;
    }
    io.err(`opencomms: internal error: ${(e as Error).message}\n`);
    return EXIT_FAIL;
  }
  return code;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('/src/cli/main.ts')) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`opencomms: internal error: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
