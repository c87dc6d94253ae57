// `.opencomms/claude-code-hooks.mjs` (hosts.md "The hook runner"): the hook runner Claude Code (and Codex,
// with `--host codex`) runs at every session start, prompt, turn end and session end, and as the
// waiter that wakes an idle session (`wait`). It runs on every prompt, so the common case (nothing
// for this session) is answered from a glance at the state (on PostgreSQL: one query of the
// project's mailbox rows) with Node built-ins only; the store,
// schemas and machines load (from the second file) only when there is work. Fail-open: always exit 0 with `{}` on a fault.
import { writeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { glanceProject } from '../../src/store/glance.ts';
import { HOOK_RUNNER_FULL } from '../install/bundle-names.ts';
import { hookContext, readStdin, type HookContext } from './hook-input.ts';
import { triage } from './shortcut.ts';

/** The bytes a pipe takes in one write, never split (POSIX's least PIPE_BUF). */
const PIPE_BUF = 512;

/** Whether `text` went to fd 1 in one write. */
function wroteWhole(text: string): boolean {
  try {
    return writeSync(1, text) === Buffer.byteLength(text);
  } catch {
    return false;
  }
}

/** The waiter (`wait`) compiles the full bundle whole as it loads it, not each function at its
 *  first call: its hand-over runs once, when the mail has come, and the functions on that path
 *  that its rehearsal (wake.ts) does not reach would be compiled then. It costs the waiter's start,
 *  which nobody waits for, some CPU and memory; under the installed command its exit, which frees
 *  that memory, is off the wake's path (install.ts WAIT_CMD). */
const WAITER_V8_FLAGS = '--no-lazy';

/** The full path, from the file installed beside this one (a computed specifier: never inlined). */
const full = (): Promise<typeof import('./hook-full.ts')> =>
  import(new URL(`./${HOOK_RUNNER_FULL}`, import.meta.url).href);

/** The woken turn's commit runs in a process of its own, so the turn's model request does not
 *  wait for the store: the prompt already proves the batch reached the session. `node:child_process`
 *  is loaded here only: with the `node:net` and stream modules it brings, it would cost every
 *  prompt a few ms. */
async function confirmDetached(ctx: HookContext) {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'confirm', ctx.project, '--host', ctx.host], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  child.stdin!.end(JSON.stringify(ctx.input));
  child.unref();
}

async function main(): Promise<void> {
  let out: unknown = {};
  try {
    const ctx = hookContext(process.argv.slice(2), readStdin(), process.env);
    if (ctx.mode !== 'event') {
      // node:v8 brings the stream modules: taken here, never by an empty-queue answer.
      if (ctx.mode === 'wait') process.getBuiltinModule('node:v8').setFlagsFromString(WAITER_V8_FLAGS);
      const { runWaiter, confirmWoken } = await full();
      process.exitCode = ctx.mode === 'wait' ? await runWaiter(ctx) : await confirmWoken(ctx);
      return;
    }
    const todo = triage(await glanceProject(ctx.project, ctx.env), ctx);
    if (todo === 'confirm') await confirmDetached(ctx);
    else if (todo === 'full') out = await (await full()).handleHook(ctx);
  } catch {
    out = {};
  }
  const text = `${JSON.stringify(out)}\n`;
  // A short answer (the empty queue's `{}`) goes straight to the descriptor, whole in one write
  // (at most PIPE_BUF bytes): process.stdout on a pipe, as hosts run hooks, loads the net and
  // stream modules first, a few ms of every prompt. A longer one, or one the descriptor refused
  // (a non-blocking pipe that is full), goes through the stream, which writes it all.
  if (!(Buffer.byteLength(text) <= PIPE_BUF && wroteWhole(text))) process.stdout.write(text);
  process.exitCode = 0;
}

await main();
