// `opencomms codex [codex args…]`: the real Codex TUI in a pseudo-terminal, every keystroke,
// resize and signal passed through unchanged, plus the waiter that wakes the session when its
// mail may be handed over (wake.ts). The launcher never writes to the pseudo-terminal on its
// own: it only watches when the user last typed and when the screen last changed, which is the
// busy hold of the delivery policy (never wake while the user types or a turn runs).
import { readFileSync } from 'node:fs';
import { spawn as ptySpawn, type IPty } from '@lydell/node-pty';
import { startWaiter, type Waiter } from './wake.ts';

/** After a keystroke, the user counts as typing this long: a wake then would start a turn under
 *  their hands. Longer than the pause between words of a typist, short enough that a wake held by
 *  typing still lands within seconds of the last key. */
const TYPING_QUIET_MS = 2000;

/** While the TUI redraws (a turn's spinner ticks several times a second), a turn is running; an
 *  idle TUI writes nothing. This long without output means the screen has settled. */
const OUTPUT_QUIET_MS = 700;

/** Flags that make Codex run without its shared background server ("embedded mode"): no other
 *  process can start a turn then, so the wake is not armed. */
const EMBEDDED_FLAGS = ['--dangerously-bypass-hook-trust'];

const FORWARDED = ['SIGTERM', 'SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const;

export interface LaunchOptions {
  project: string;
  args: string[];
  /** The Codex executable (OPENCOMMS_CODEX_BIN, else `codex` on PATH). */
  codex: string;
  env: NodeJS.ProcessEnv;
  /** Diagnostics (never message text); nothing is written to the user's terminal. */
  log(line: string): void;
}

/** How often the launcher looks whether Codex itself has ended. */
const CHILD_WATCH_MS = 250;

/** The exit code of a process that has ended (a zombie not yet reaped: its status from
 *  /proc/<pid>/stat; reaped and gone: 1), or null while it runs. */
function endedWith(pid: number): number | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 1;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] !== 'Z') return null;
  const status = Number(fields.at(-1));
  return status & 0x7f ? 128 + (status & 0x7f) : (status >> 8) & 0xff;
}

/** Runs Codex to its end; resolves with the exit code the launcher should exit with. */
export async function launchCodex(o: LaunchOptions): Promise<number> {
  const stdin = process.stdin,
    stdout = process.stdout;
  const pty: IPty = ptySpawn(o.codex, o.args, {
    name: o.env.TERM || 'xterm-256color',
    cols: stdout.columns || 80,
    rows: stdout.rows || 24,
    cwd: process.cwd(),
    env: o.env as Record<string, string>,
  });
  let lastKey = 0,
    lastOutput = Date.now();
  let waiter: Waiter | null = null;
  let recheck: NodeJS.Timeout | null = null;

  // Mail held while the user typed or a turn ran goes once both have settled.
  const settle = (after: number) => {
    if (recheck) clearTimeout(recheck);
    recheck = setTimeout(() => waiter?.recheck(), after);
    recheck.unref();
  };
  pty.onData((d) => {
    lastOutput = Date.now();
    stdout.write(d);
    settle(Math.max(OUTPUT_QUIET_MS, lastKey + TYPING_QUIET_MS - lastOutput));
  });
  const onKey = (d: string) => {
    lastKey = Date.now();
    pty.write(d);
    settle(TYPING_QUIET_MS);
  };
  if (stdin.isTTY) stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  stdin.on('data', onKey);
  const onResize = () => pty.resize(stdout.columns || 80, stdout.rows || 24);
  stdout.on('resize', onResize);
  const forward = (sig: NodeJS.Signals) => () => {
    try {
      process.kill(pty.pid, sig);
    } catch {
      // Codex is already gone
    }
  };
  const handlers = FORWARDED.map((sig) => [sig, forward(sig)] as const);
  for (const [sig, h] of handlers) process.on(sig, h);

  const exited = new Promise<number>((resolve) => {
    pty.onExit(({ exitCode, signal }) => resolve(signal ? 128 + signal : exitCode));
    // node-pty reports an exit only once the terminal closes too, which a process that inherited
    // it (Codex's background server) can hold open: the process itself is watched as well.
    const watch = setInterval(() => {
      const code = endedWith(pty.pid);
      if (code !== null) {
        clearInterval(watch);
        resolve(code);
      }
    }, CHILD_WATCH_MS);
    watch.unref();
  });
  if (o.args.some((a) => EMBEDDED_FLAGS.includes(a)))
    o.log(`not waking: ${EMBEDDED_FLAGS.join(', ')} runs Codex without its background server`);
  else {
    const busy = () => Date.now() - lastKey < TYPING_QUIET_MS || Date.now() - lastOutput < OUTPUT_QUIET_MS;
    waiter = await startWaiter({ project: o.project, env: o.env, busy, log: o.log }).catch((e) => {
      o.log(`waiter not started: ${(e as Error).message}`);
      return null;
    });
  }
  const code = await exited;
  o.log(`codex exited (${code})`);
  for (const [sig, h] of handlers) process.off(sig, h);
  stdin.off('data', onKey);
  stdout.off('resize', onResize);
  if (stdin.isTTY) stdin.setRawMode(false);
  stdin.pause();
  if (recheck) clearTimeout(recheck);
  await waiter?.close();
  o.log('waiter closed');
  return code;
}
