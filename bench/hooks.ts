// The hook runner's cost on every prompt (hosts.md "The hook runner"): `node .opencomms/claude-code-hooks.mjs`
// answering UserPromptSubmit for a bound session with an empty queue, wall time including Node's
// start-up, as Claude Code pays it. Beside it, a bare `node -e ""` on the same machine (the floor
// no hook can beat) and the same call with one message waiting (the full path).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { install, installMember } from '../src/cli/hosts.ts';
import { openRuntime } from '../src/runtime/runtime.ts';
import { emit, emitRatio, now, stats, withProject } from './lib.ts';

/** Calls per figure: enough for a stable p50 on a busy 2-core machine, about 10 s in all. */
const RUNS = 40;

function time(args: string[], input: string): number {
  const t = now();
  execFileSync(process.execPath, args, { input, stdio: ['pipe', 'ignore', 'ignore'] });
  return now() - t;
}

/** A project with Claude Code installed, its member pinned (`sess_bench`) and a peer in channel
 *  `bench`; the installed runner and the input of a hook call of Claude Code session `claude-bench`. */
export async function hookBenchProject(dir: string) {
  await install('claude-code', dir, { detect: async () => 'x', warn: () => {} });
  await installMember(dir, { id: 'sess_bench' });
  const rt = openRuntime(dir, { log: () => {} });
  const caller = (sid: string) => ({
    session_id: sid,
    host: 'claude-code',
    surface: 'mcp',
    delivery_mode: 'pull',
    host_session_id: null,
    project_id: 'local-project',
    worktree: dir,
  });
  await rt.run({
    op: 'create',
    caller: caller('sess_bench'),
    args: { channel: 'bench', role: 'Worker', role_prompt: 'work', rate_limit: 1000 },
  });
  await rt.run({
    op: 'join',
    caller: caller('sess_peer'),
    args: { channel: 'bench', role: 'Peer', role_prompt: 'send' },
  });
  const runner = join(dir, '.opencomms', 'claude-code-hooks.mjs');
  const input = (event: string) =>
    JSON.stringify({ hook_event_name: event, session_id: 'claude-bench', cwd: dir, prompt: 'next' });
  return { rt, runner, input };
}

export async function hooksBench() {
  await withProject(async (dir) => {
    const { rt, runner, input } = await hookBenchProject(dir);
    time([runner, 'auto', dir], input('SessionStart')); // binds the session
    const floor: number[] = [];
    const empty: number[] = [];
    const mail: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      floor.push(time(['-e', ''], ''));
      empty.push(time([runner, 'auto', dir], input('UserPromptSubmit')));
      await rt.run({ op: 'send', sid: 'sess_peer', args: { channel: 'bench', content: `m${i}` } });
      mail.push(time([runner, 'auto', dir], input('UserPromptSubmit')));
    }
    await rt.close();
    emit('hook_empty_queue_wall', {
      unit: 'ms',
      ...stats(empty),
      what: 'UserPromptSubmit, bound session, nothing pending: node start-up included',
    });
    emitRatio('hook_empty_queue_over_node_floor', stats(empty).p50, stats(floor).p50, '<= 1.25', {
      unit: 'ms',
      floor_is: 'node -e "" run just before each hook call',
    });
    emit('hook_node_floor_wall', {
      unit: 'ms',
      ...stats(floor),
      what: 'node -e "" on the same machine (no hook can start faster)',
    });
    // Paired with the floor run just before it, so a busy machine's start-up noise cancels out.
    emit('hook_over_node_floor', {
      unit: 'ms',
      ...stats(empty.map((e, i) => e - floor[i]!)),
      what: 'the empty-queue hook minus the node -e "" run before it',
    });
    emit('hook_one_message_wall', {
      unit: 'ms',
      ...stats(mail),
      what: 'UserPromptSubmit handing one message over (drain + commit + frame)',
    });
  });
}
