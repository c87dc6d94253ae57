// A child process whose stdout lines a test waits for (watch, console, agent workers).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export const BIN = join(import.meta.dirname, '..', '..', 'bin', 'opencomms.js');

export interface Proc {
  child: ChildProcess;
  lines: string[];
  stderr(): string;
  /** Resolves with the first stdout line (already seen or to come) that matches. */
  waitFor(pred: (line: string) => boolean, ms?: number): Promise<string>;
  /** Resolves with the exit code when the process ends. */
  exited: Promise<number | null>;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function start(args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Proc {
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let buf = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
    for (const w of [...waiters]) w();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of [...waiters]) w();
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    lines,
    exited,
    stderr: () => err,
    waitFor: (pred, ms = 15_000) =>
      new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timeout waiting for a line; stdout:\n${lines.join('\n')}\nstderr:\n${err}`));
        }, ms);
        const check = () => {
          const hit = lines.find(pred);
          if (hit === undefined) return;
          clearTimeout(t);
          waiters.delete(check);
          resolve(hit);
        };
        waiters.add(check);
        check();
      }),
    stop: async (signal = 'SIGINT') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
