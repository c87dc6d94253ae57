// What every command module gets: where to write, which project, how to answer. One place for
// the `--json` document, the exit codes of §9 and the operator identity of the CLI.
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { refuse, RefusalError, type ToolResult } from '../protocol/result.ts';
import { openRuntime, type Runtime, type RuntimeOptions } from '../runtime/runtime.ts';
import { CLI_PROJECT_ID, operatorActor } from '../runtime/operator.ts';

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: Io = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
};

/** §9 exit codes: 0 success; 1 any refusal, failure, usage error or unknown command. */
export const EXIT_OK = 0;
export const EXIT_FAIL = 1;


export interface CliContext {
  io: Io;
  /** Records the exit code of the command that ran. */
  exit(code: number): void;
}

/** `--project` may stand anywhere on the line (a program option commander reads everywhere). It
 *  must name an existing directory: a missing one would be created by the first write, somewhere
 *  the operator did not mean, and a file fails every read and write. Thrown as a refusal, which
 *  `main` prints like any other answer. */
export function projectOf(cmd: Command): string {
  const dir = resolve((cmd.optsWithGlobals() as { project?: string }).project ?? process.cwd());
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    throw new RefusalError(refuse('project_not_found', `The project directory ${dir} does not exist. Pass an existing project with --project <dir>.`));
  }
  if (!isDir) throw new RefusalError(refuse('project_not_directory', `${dir} is a file, not a directory. Pass the project's directory with --project <dir>.`));
  return dir;
}

/** The CLI acts as the operator with the `cli-local-project` sentinel (§5.10). */
export const cliOperator = (project: string) => operatorActor(project, CLI_PROJECT_ID);

/** Runs `fn` with a runtime on the project and always closes it. */
export async function withRuntime<T>(project: string, fn: (rt: Runtime) => Promise<T>, opts?: RuntimeOptions): Promise<T> {
  const rt = openRuntime(project, opts);
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

/**
 * Prints a result: with `--json` exactly one `{ok, message, data}` document on stdout; otherwise
 * the text rendering on stdout, or the refusal's message on stderr. Returns the exit code.
 * `text` names the shape of the operation's data (the runtime answers with untyped data).
 */
export function answer<D extends object>(io: Io, r: ToolResult<object>, json: boolean | undefined, text: (data: D) => string): number {
  if (json) io.out(`${JSON.stringify(r)}\n`);
  else if (r.ok) io.out(ensureNewline(text(r.data as D)));
  else io.err(`opencomms: ${r.message}\n`);
  return r.ok ? EXIT_OK : EXIT_FAIL;
}

const ensureNewline = (t: string) => (t.endsWith('\n') ? t : `${t}\n`);
