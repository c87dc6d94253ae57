// Shared fixtures of the store tests: temp projects, child processes, small states.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newChannelId } from '../../src/protocol/ids.ts';
import type { State } from '../../src/protocol/schema.ts';
import type { MutateOutcome } from '../../src/store/index.ts';
import { ensureDir, resolvePaths, type StorePaths } from '../../src/store/paths.ts';
import { afterEach, beforeEach } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../..');

/** The entries of a directory without this process's lock token: a live process keeps one in
 *  `.opencomms/` (src/store/file/lock.ts); anything else left behind is a leftover. */
export const entriesOf = async (dir: string) =>
  (await readdir(dir)).filter((n) => !n.startsWith(`.state-lock.${process.pid}.`));

/** A fresh temp project per test (removed after it): `set` receives its dir and paths. Workers
 *  are SIGKILLed first when the test leaves any running. */
export function useTempProject(
  set: (p: { dir: string; paths: StorePaths }) => void,
  opts: { ensure?: boolean; workers?: Worker[] } = {},
) {
  let cleanup: () => Promise<void> = async () => {};
  beforeEach(async () => {
    const t = await tempProject();
    cleanup = t.cleanup;
    const paths = resolvePaths(t.dir);
    if (opts.ensure) await ensureDir(paths);
    set({ dir: t.dir, paths });
  });
  afterEach(async () => {
    for (const w of opts.workers?.splice(0) ?? []) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    await cleanup();
  });
}

export async function tempProject(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'opencomms-store-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** The test counter lives in errors[0].message: a field any mutation may set freely. */
export const counterOf = (s: State) => Number(s.errors[0]?.message ?? 0);
export const incrementCounter = (draft: State): MutateOutcome<number> => {
  const n = counterOf(draft) + 1;
  draft.errors = [{ at: 0, message: String(n) }];
  return { changed: true, result: n };
};

export interface Worker {
  child: ChildProcess;
  /** Resolves when the child printed a line starting with `prefix`; returns that line. */
  line(prefix: string): Promise<string>;
  exited: Promise<number | null>;
}

export function spawnWorker(...args: string[]): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'store-worker.ts'), ...args], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const waiters: { prefix: string; resolve: (l: string) => void }[] = [];
  const scan = () => {
    for (const w of [...waiters]) {
      const l = out.split('\n').find((x) => x.startsWith(w.prefix));
      if (l !== undefined) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(l);
      }
    }
  };
  child.stdout!.on('data', (d) => {
    out += d;
    scan();
  });
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    exited,
    line: (prefix) =>
      new Promise<string>((resolveLine, reject) => {
        waiters.push({ prefix, resolve: resolveLine });
        scan();
        void exited.then((code) => reject(new Error(`worker exited (${code}) before "${prefix}": ${err}`)));
      }),
  };
}

/** A v2 channel with the given members (full rows). */
export function channel(name: string, members: Record<string, unknown>[] = [], extra: Record<string, unknown> = {}) {
  return { id: newChannelId(), name, project_id: 'local-project', worktree: '/tmp/x', members, ...extra };
}

export const member = (session_id: string, role: string) => ({
  session_id,
  role,
  role_prompt: `You are ${role}.`,
  joined_at: 1,
  host: 'mcp',
  surface: 'mcp',
  delivery_mode: 'pull',
});
