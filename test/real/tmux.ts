// An interactive client in a terminal: a private tmux server (its own socket, no user config)
// whose one pane runs the command inside a loopback-only network namespace (env.ts `namespaced`).
// Tests type with `keys` and read the screen with `screen` / `waitScreen`, like a person would.
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { namespaced, type RunOptions } from './env.ts';

export interface Terminal {
  /** tmux `send-keys` (literal text with `-l`, or key names such as `Enter`, `Escape`, `C-c`). */
  keys(...keys: string[]): void;
  /** Types `text` literally, then presses Enter. */
  type(text: string): void;
  /** The visible screen as plain text. */
  screen(): string;
  waitScreen(pattern: RegExp, timeoutMs: number): Promise<string>;
  /** Waits for the pane's process to end: `status N` or `signal N`. */
  waitExit(timeoutMs: number): Promise<string>;
  /** The pid of the pane's process (the namespace wrapper; the client is its descendant). */
  panePid(): number | null;
  /** Kills the tmux server; the pane's processes get SIGHUP, survivors of its group SIGKILL. */
  close(): void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startTerminal(
  cmd: string,
  args: string[],
  o: RunOptions & { cols?: number; rows?: number },
): Promise<Terminal> {
  const ns = await namespaced(cmd, args, o);
  const sock = join(o.env.TMPDIR ?? '/tmp', `tmux-${process.pid}-${Date.now()}.sock`);
  const tmux = (...a: string[]) =>
    execFileSync('tmux', ['-S', sock, '-f', '/dev/null', ...a], {
      cwd: o.cwd,
      env: { ...o.env, TERM: 'xterm-256color' },
      encoding: 'utf8',
    });
  tmux('new-session', '-d', '-s', 'main', '-x', String(o.cols ?? 160), '-y', String(o.rows ?? 48), '--', ...ns.argv);
  tmux('set-option', '-t', 'main', 'remain-on-exit', 'on');
  let pane: number | null = Number(tmux('display-message', '-p', '-t', 'main', '#{pane_pid}').trim()) || null;
  const kill = setTimeout(() => close(), o.timeoutMs);
  kill.unref();
  let closed = false;
  function close() {
    if (closed) return;
    closed = true;
    clearTimeout(kill);
    spawnSync('tmux', ['-S', sock, 'kill-server'], { env: o.env });
    if (pane) {
      try {
        process.kill(-pane, 'SIGKILL');
      } catch {
        // the group is gone
      }
    }
    pane = null;
    ns.close();
  }
  const screen = () => (closed ? '' : tmux('capture-pane', '-p', '-t', 'main'));
  return {
    keys: (...keys) => void tmux('send-keys', '-t', 'main', ...keys),
    type(text) {
      tmux('send-keys', '-t', 'main', '-l', text);
      tmux('send-keys', '-t', 'main', 'Enter');
    },
    screen,
    async waitScreen(pattern, timeoutMs) {
      const end = performance.now() + timeoutMs;
      let last = '';
      while (performance.now() < end) {
        last = screen();
        if (pattern.test(last)) return last;
        await sleep(100);
      }
      throw new Error(`timeout ${timeoutMs} ms waiting for ${pattern} on screen:\n${last}`);
    },
    async waitExit(timeoutMs) {
      const end = performance.now() + timeoutMs;
      let last = '';
      while (performance.now() < end) {
        last = tmux(
          'display-message',
          '-p',
          '-t',
          'main',
          '#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pid}',
        );
        const [dead, status, signal, server] = last.trim().split('|');
        if (dead === '1' && status) return `status ${status}`;
        if (dead === '1' && signal) return `signal ${signal}`;
        // Closed terminal, exit not seen: tmux built with libutempter loses the SIGCHLD of a pane
        // that exits while utempter's helper runs at the pane's close, and leaves it a zombie
        // (tmux/tmux#311). A SIGCHLD makes the server reap it.
        if (dead === '1') process.kill(Number(server), 'SIGCHLD');
        await sleep(100);
      }
      throw new Error(
        `timeout ${timeoutMs} ms waiting for the pane's process to end (${last.trim()}); screen:\n${screen()}`,
      );
    },
    panePid: () => pane,
    close,
  };
}
