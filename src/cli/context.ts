// What every command module gets: where to write, which project, how to answer. One place for
// the `--json` document, the exit codes (operator.md "Command line") and the operator identity of the CLI.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { CHANNEL_NAME_RE } from '../protocol/ids.ts';
import { MAX_CHANNEL_NAME } from '../protocol/limits.ts';
import { refuse, RefusalError, type ToolResult } from '../protocol/result.ts';
import { openRuntime, type Runtime, type RuntimeOptions } from '../runtime/runtime.ts';
import { CLI_PROJECT_ID, operatorActor } from '../runtime/operator.ts';
import { existingDir } from './project-dir.ts';

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: Io = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
};

/** Exit codes (operator.md "Command line"): 0 success; 1 any refusal, failure, usage error or unknown command. */
export const EXIT_OK = 0;
export const EXIT_FAIL = 1;

export interface CliContext {
  io: Io;
  /** Records the exit code of the command that ran. */
  exit(code: number): void;
}

export interface ProjectRoot {
  dir: string;
  /** What marks it: a `.opencomms` entry, a `.git` entry, or nothing found (the start itself). */
  via: '.opencomms' | 'git' | 'start';
}

/** The project a directory belongs to, found as the hosts find theirs: the nearest directory at or
 *  above `start` holding `.opencomms` or `.git`. The walk stops below the home directory, so a
 *  stray `~/.opencomms` never captures every project under home. */
export function findProjectRoot(start: string, home = homedir()): ProjectRoot {
  for (let dir = start; ; ) {
    if (existsSync(join(dir, '.opencomms'))) return { dir, via: '.opencomms' };
    if (existsSync(join(dir, '.git'))) return { dir, via: 'git' };
    const up = dirname(dir);
    if (up === dir || up === home) return { dir: start, via: 'start' };
    dir = up;
  }
}

/** `--project` may stand anywhere on the line (a program option commander reads everywhere). It
 *  must name an existing directory: a missing one would be created by the first write, somewhere
 *  the operator did not mean, and a file fails every read and write (thrown as a refusal, which
 *  `main` prints like any other answer). Without it the project is the root above the working
 *  directory, and a root other than the working directory is named on stderr, so nobody acts on a
 *  project they did not mean. */
export function projectOf(cmd: Command, io: Io = processIo): string {
  const given = (cmd.optsWithGlobals() as { project?: string }).project;
  if (given !== undefined) return existingDir(resolve(given));
  const cwd = process.cwd();
  const root = findProjectRoot(cwd);
  if (root.dir !== cwd)
    io.err(
      `opencomms: project ${root.dir} (${root.via === 'git' ? 'the git root' : 'the nearest directory with .opencomms'} above ${cwd})\n`,
    );
  return root.dir;
}

/** `n` and the word, in the plural unless n is 1: "1 member", "2 members". */
export const counted = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** Longest part of a rejected name shown back: enough to recognise it, never a name it starts with. */
const NAME_SHOWN = 24;

/** A channel name as the operator typed it, or the one refusal every command gives for a
 *  name no channel can have: over MAX_CHANNEL_NAME characters (its length named, never the channel
 *  its first characters would name), or outside the name rule (protocol.md "Rules and defaults"). */
export function channelArg(raw: string): string {
  const name = raw.trim().toLowerCase();
  if (name.length > MAX_CHANNEL_NAME)
    throw new RefusalError(
      refuse(
        'invalid_channel_name',
        `"${raw.trim().slice(0, NAME_SHOWN)}…" is not a channel name: it has ${name.length} characters, and a channel name has at most ${MAX_CHANNEL_NAME}.`,
      ),
    );
  if (!CHANNEL_NAME_RE.test(name))
    throw new RefusalError(
      refuse(
        'invalid_channel_name',
        `"${raw}" is not a channel name: use 1-${MAX_CHANNEL_NAME} lowercase letters, digits, "-" or "_", starting with a letter or digit.`,
      ),
    );
  return raw;
}

/** The CLI acts as the operator with the `cli-local-project` sentinel (protocol.md "Timer, kick, saved channels"). */
export const cliOperator = (project: string) => operatorActor(project, CLI_PROJECT_ID);

/** Runs `fn` with a runtime on the project and always closes it. */
export async function withRuntime<T>(
  project: string,
  fn: (rt: Runtime) => Promise<T>,
  opts?: RuntimeOptions,
): Promise<T> {
  const rt = openRuntime(project, opts);
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

/** The engine speaks to agents (protocol.md "Refusal reasons"): its next steps name MCP tools and
 *  send the agent to the operator. The operator at the CLI gets the command that does it instead. */
const FOR_OPERATOR: Array<[RegExp, string]> = [
  [
    /Do not create a channel or replace anyone: report this to the operator, who checks the project and worktree\./,
    '`opencomms channel list` lists the channels of this project.',
  ],
  [/List archives with opencomms_archive\./, '`opencomms channel list` lists the saved ones.'],
  [
    /Channel "([^"]+)" is paused\. Resume it with opencomms_resume, or wait\./,
    'Channel "$1" is paused: `opencomms resume $1` releases it.',
  ],
  [/Restore it first \(opencomms_resume_session or (`opencomms channel restore [^`]+`)\)\./, 'Restore it first: $1.'],
];

export function forOperator<R extends ToolResult<object>>(r: R): R {
  if (r.ok) return r;
  let message = r.message;
  for (const [from, to] of FOR_OPERATOR) message = message.replace(from, to);
  return message === r.message ? r : { ...r, message };
}

/**
 * Prints a result: with `--json` exactly one `{ok, message, data}` document on stdout; otherwise
 * the text rendering on stdout, or the refusal's message on stderr. Returns the exit code.
 * `text` names the shape of the operation's data (the runtime answers with untyped data).
 */
export function answer<D extends object>(
  io: Io,
  r: ToolResult<object>,
  json: boolean | undefined,
  text: (data: D) => string,
): number {
  // A refusal is one line, whoever wrote its message.
  const said = r.ok ? r : forOperator({ ...r, message: r.message.trim().replace(/\s*\n\s*/g, ' ') });
  if (json) io.out(`${JSON.stringify(said)}\n`);
  else if (r.ok) io.out(ensureNewline(text(r.data as D)));
  else io.err(`opencomms: ${said.message}\n`);
  return r.ok ? EXIT_OK : EXIT_FAIL;
}

const ensureNewline = (t: string) => (t.endsWith('\n') ? t : `${t}\n`);
