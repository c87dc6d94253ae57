// `opencomms gui` / `opencomms serve` (operator.md "Command line", "The console"): the web console on a loopback address.
// `gui` also opens the browser (unless --no-open / --server); `serve` never does. A busy port or a
// non-loopback --bind exits 1. The server is loaded only when it runs: every `opencomms` start
// (an MCP server's included) stays lean.
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import { LOOPBACK_BINDS } from '../../console/guard.ts';
import { DEFAULT_PORT } from '../../console/limits.ts';
import { refuse, RefusalError } from '../../protocol/result.ts';
import type { CliCommand } from '../command.ts';
import { EXIT_OK, projectOf, type CliContext } from '../context.ts';

/** The largest TCP port number. */
const MAX_PORT = 65_535;

/** The platform's "open this URL" command (no shell; the URL is one argument). */
function openBrowser(url: string, log: (l: string) => void) {
  const [cmd, args] =
    process.platform === 'win32'
      ? ['rundll32', ['url.dll,FileProtocolHandler', url]]
      : process.platform === 'darwin'
        ? ['open', [url]]
        : ['xdg-open', [url]];
  const child = spawn(cmd, args, { detached: true, stdio: 'ignore' });
  child.on('error', () => log(`Could not start a browser (${cmd}); open ${url} yourself.`));
  child.unref();
}

interface Flags {
  port: string;
  bind: string;
  open?: boolean;
  server?: boolean;
}

async function serve(ctx: CliContext, cmd: Command, o: Flags, open: boolean) {
  // Decimal digits only: Number() would also take "0x50" (port 80) and "1e3" (port 1000).
  const port = /^[0-9]{1,5}$/.test(o.port) ? Number(o.port) : NaN;
  if (!(port >= 1 && port <= MAX_PORT))
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `--port must be a whole number from 1 to ${MAX_PORT} in decimal digits (not "${o.port}").`,
        { field: 'port' },
      ),
    );
  if (!(LOOPBACK_BINDS as readonly string[]).includes(o.bind))
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `refusing to listen on "${o.bind}": the console binds loopback only (${LOOPBACK_BINDS.join(', ')}).`,
        { field: 'bind' },
      ),
    );
  const project = projectOf(cmd);
  const log = (l: string) => ctx.io.err(`[opencomms-console] ${l}\n`);
  const { startConsole } = await import('../../console/server.ts');
  let server;
  try {
    server = await startConsole({ project, port, bindAddress: o.bind, log });
  } catch (e) {
    if (e instanceof RefusalError) throw e;
    const err = e as NodeJS.ErrnoException;
    throw new RefusalError(
      refuse(
        'invalid_argument',
        err.code === 'EADDRINUSE'
          ? `port ${port} on ${o.bind} is in use; pass --port <another>.`
          : `the console cannot listen on ${o.bind}:${port} (${err.code ?? err.message}); pass another --port or --bind.`,
        { field: 'port', code: err.code ?? null },
      ),
    );
  }
  // The signal handlers come before the ready line: whoever reads it may stop us at once, and a
  // signal with no handler yet kills the process instead of closing the console.
  const stopped = new Promise<void>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve());
  });
  ctx.io.out(`OpenComms console: ${server.url} (project ${project}); Ctrl-C stops.\n`);
  if (open) openBrowser(server.url, log);
  await stopped;
  await server.close();
  ctx.exit(EXIT_OK);
}

const options = (c: Command) =>
  c
    .option('--port <n>', `TCP port (1..${MAX_PORT})`, String(DEFAULT_PORT))
    .option('--bind <address>', `loopback address to listen on (${LOOPBACK_BINDS.join(' | ')})`, LOOPBACK_BINDS[0]);

export const consoleCommands: CliCommand = {
  register(program, ctx) {
    options(program.command('gui').description('the web console; opens it in the browser'))
      .option('--no-open', 'do not open the browser')
      .option('--server', 'same as --no-open')
      .action((o: Flags, cmd: Command) => serve(ctx, cmd, o, o.open !== false && !o.server));
    options(program.command('serve').description('the web console, without opening a browser')).action(
      (o: Flags, cmd: Command) => serve(ctx, cmd, o, false),
    );
  },
};
