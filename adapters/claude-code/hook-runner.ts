// `.opencomms/claude-code-hooks.mjs` (hosts.md "The hook runner"): the hook runner Claude Code (and Codex,
// with `--host codex`) runs at every session start, prompt, turn end and session end, and as the
// waiter that wakes an idle session (`wait`). It runs on every prompt, so the common case (nothing
// for this session) is answered from a glance at the state (on PostgreSQL: one query of the
// project's mailbox rows) with Node built-ins only; the store,
// schemas and machines load (from the second file) only when there is work. Fail-open: always exit 0 with `{}` on a fault.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { glanceProject } from '../../src/store/glance.ts';
import { HOOK_RUNNER_FULL } from '../install/bundle-names.ts';
import { hookContext, readStdin, type HookContext } from './hook-input.ts';
import { triage } from './shortcut.ts';

/** The full path, from the file installed beside this one (a computed specifier: never inlined). */
const full = (): Promise<typeof import('./hook-full.ts')> =>
  import(new URL(`./${HOOK_RUNNER_FULL}`, import.meta.url).href);

/** The woken turn's commit runs in a process of its own, so the turn's model request does not
 *  wait for the store: the prompt already proves the batch reached the session. */
function confirmDetached(ctx: HookContext) {
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
      const { runWaiter, confirmWoken } = await full();
      process.exitCode = ctx.mode === 'wait' ? await runWaiter(ctx) : await confirmWoken(ctx);
      return;
    }
    const todo = triage(await glanceProject(ctx.project, ctx.env), ctx);
    if (todo === 'confirm') confirmDetached(ctx);
    else if (todo === 'full') out = await (await full()).handleHook(ctx);
  } catch {
    out = {};
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exitCode = 0;
}

await main();
