// The `opencomms` command: commander parses (subcommands, generated help, `--project` anywhere),
// the registry supplies the commands. Every failure is one line on stderr and exit code 1, or with
// `--json` one `{ok:false, message, data.reason}` document on stdout; never a stack trace.
import { Command, CommanderError } from 'commander';
import { refuse, RefusalError, type Refusal } from '../protocol/result.ts';
import { VERSION } from '../version.ts';
import { answer, channelArg, EXIT_FAIL, EXIT_OK, processIo, type CliContext, type Io } from './context.ts';
import { COMMANDS } from './registry.ts';

const HELP_HINT = 'Run `opencomms help` for the list of commands.';

/** A commander message as one line: its `error: ` prefix dropped, a suggestion on the same line. */
const usageLine = (message: string) =>
  `${message
    .replace(/^error: /, '')
    .trim()
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\.$/, '')}. ${HELP_HINT}`;

/** The positions and options that name a channel. */
const CHANNEL_ARGS = new Set(['channel', 'name']);
const CHANNEL_OPTIONS = ['channel', 'as'];

/** Every channel name on the line is judged once, here, before any command runs: one answer for
 *  a name that cannot be a channel's, whichever command it was given to. */
function checkChannelNames(cmd: Command) {
  cmd.registeredArguments.forEach((a, i) => {
    const v = cmd.processedArgs[i];
    if (CHANNEL_ARGS.has(a.name()) && typeof v === 'string') channelArg(v);
  });
  const o = cmd.opts() as Record<string, unknown>;
  for (const k of CHANNEL_OPTIONS) if (typeof o[k] === 'string') channelArg(o[k] as string);
}

export function buildProgram(ctx: CliContext, json = false): Command {
  const program = new Command('opencomms')
    .description(`OpenComms ${VERSION}: messaging between AI coding sessions in one project`)
    .option(
      '--project <dir>',
      'the project directory (default: the nearest directory at or above the current one holding .opencomms or .git); allowed anywhere on the line',
    )
    .helpCommand('help [command]', 'usage of opencomms or of one command')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.io.out(s),
      writeErr: (s) => ctx.io.err(s),
      // One line; under --json the document on stdout says it instead (main).
      outputError: (s, write) => {
        if (!json) write(`opencomms: ${usageLine(s)}\n`);
      },
    })
    .showSuggestionAfterError(true)
    .hook('preAction', (_program, action) => checkChannelNames(action));
  for (const c of COMMANDS) c.register(program, ctx);
  // Subcommands inherit the same output and error handling.
  for (const sub of program.commands) inherit(sub, program);
  return program;
}

function inherit(cmd: Command, from: Command) {
  cmd.exitOverride().configureOutput(from.configureOutput());
  for (const sub of cmd.commands) inherit(sub, from);
}

/** What a failure that is not a refusal says. Only a fault of OpenComms itself is internal_error. */
export function refusalOf(e: unknown): Refusal {
  if (e instanceof RefusalError) return e.refusal;
  const err = e as NodeJS.ErrnoException;
  if (err?.code === 'ERR_INVALID_URL')
    return refuse(
      'invalid_argument',
      `"${(err as { input?: string }).input ?? ''}" is not a URL: use postgres://user@host:port/database.`,
    );
  return refuse(
    'internal_error',
    `internal error: ${firstLine(err?.message ?? String(e))} (a fault of OpenComms; \`opencomms doctor\` checks the project).`,
  );
}

const firstLine = (s: string) => s.split('\n')[0]!.trim();

/** The words of a command line without its program options (`--project <dir>`, `--json`). */
function positionals(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--project') i++;
    else if (!a.startsWith('--project=') && a !== '--json') out.push(a);
  }
  return out;
}

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  let code = EXIT_OK;
  const ctx: CliContext = { io, exit: (c) => void (code = c) };
  // Whoever asked for `--json` reads stdout as one document, refusals and usage errors included.
  const json = argv.includes('--json');
  const program = buildProgram(ctx, json);
  if (argv.length === 0) {
    program.outputHelp();
    return EXIT_OK;
  }
  // Commander answers `opencomms channel` (a group alone) and `help <no such command>` with its
  // whole help on stderr and exit 1: a group alone is a request for its help, and a command that
  // does not exist is a usage error like any other.
  const words = positionals(argv);
  // A session is a host's (a Claude Code session, a Codex thread): channels are `opencomms channel …`.
  if (words[0] === 'session') {
    const line = usageLine(`unknown command 'session': a channel's lifecycle is \`opencomms channel …\``);
    if (json) io.out(`${JSON.stringify(refuse('usage_error', line))}\n`);
    else io.err(`opencomms: ${line}\n`);
    return EXIT_FAIL;
  }
  const group = words.length === 1 ? program.commands.find((c) => c.name() === words[0] && c.commands.length) : null;
  if (group) {
    group.outputHelp();
    return EXIT_OK;
  }
  if (
    words[0] === 'help' &&
    words[1] &&
    !program.commands.some((c) => c.name() === words[1] || c.aliases().includes(words[1]!))
  ) {
    const line = usageLine(`unknown command '${words[1]}'`);
    if (json) io.out(`${JSON.stringify(refuse('usage_error', line))}\n`);
    else io.err(`opencomms: ${line}\n`);
    return EXIT_FAIL;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    // Usage errors: commander already printed the line on stderr (naming the command or option, plus the hint).
    if (e instanceof CommanderError) {
      if (e.exitCode !== 0 && json) io.out(`${JSON.stringify(refuse('usage_error', usageLine(e.message)))}\n`);
      return e.exitCode === 0 ? EXIT_OK : EXIT_FAIL;
    }
    return answer(io, refusalOf(e), json, () => '');
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
