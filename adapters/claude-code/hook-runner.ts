// `.opencomms/claude-code-hooks.mjs` (FEATURES.md §8.2): the hook runner Claude Code (and Codex,
// with `--host codex`) runs at every session start, prompt, turn end and session end, and as the
// waiter that wakes an idle session (`wait`). It runs on every prompt, so the common case (nothing
// for this session) is answered from a glance at the state with Node built-ins only; the store,
// schemas and machines load (from the second file) only when there is work. Fail-open: always exit 0 with `{}` on a fault.
import { glance } from '../../src/store/glance.ts';
import { HOOK_RUNNER_FULL } from '../install/bundle-names.ts';
import { hookContext, readStdin } from './hook-input.ts';
import { nothingToDo } from './shortcut.ts';

/** The full path, from the file installed beside this one (a computed specifier: never inlined). */
const full = (): Promise<typeof import('./hook-full.ts')> => import(new URL(`./${HOOK_RUNNER_FULL}`, import.meta.url).href);

async function main(): Promise<void> {
  let out: unknown = {};
  try {
    const ctx = hookContext(process.argv.slice(2), readStdin(), process.env);
    if (ctx.mode === 'wait') {
      const { runWaiter } = await full();
      process.exitCode = await runWaiter(ctx);
      return;
    }
    if (!nothingToDo(glance(ctx.project), ctx)) {
      const { handleHook } = await full();
      out = await handleHook(ctx);
    }
  } catch {
    out = {};
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exitCode = 0;
}

await main();
