// The wake waiter (`claude-code-hooks.mjs wait`) as Claude Code runs it (the installed command
// under /bin/sh), with a stand-in for the Claude Code process (a sleeping child whose pid is
// CLAUDE_PID): it wakes only for deliverable mail (pause and stale held), holds the batch in flight
// under Claude Code's tag, steps aside for a newer waiter, never arms under `-p`, and takes nothing
// once Claude Code or the hook's shell is gone.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { install, installMember } from '../../../src/cli/hosts.ts';
import { processTag } from '../../../src/runtime/process.ts';
import { openRuntime, type Runtime } from '../../../src/runtime/runtime.ts';
import { useProject } from '../../helpers/project.ts';

const p = useProject('oc-wake ');

interface Waiter {
  proc: ChildProcess;
  stderr: () => string;
  exit: Promise<number | null>;
}

/** A process standing in for `claude`: the waiter watches its pid. */
function fakeClaude(): ChildProcess {
  return spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
}

/** The waiter as Claude Code starts it: the installed Stop handler's command under `/bin/sh -c`
 *  (`bare`: the runner alone, as an install of an earlier version ran it). */
function waiter(claude: ChildProcess, env: Record<string, string> = {}, bare = false): Waiter {
  const settings = JSON.parse(readFileSync(p.at('.claude/settings.json'), 'utf8'));
  const { command } = settings.hooks.Stop.flatMap((g: { hooks: unknown[] }) => g.hooks).find(
    (h: { asyncRewake?: boolean }) => h.asyncRewake,
  );
  const [file, args] = bare
    ? [process.execPath, [p.at('.opencomms/claude-code-hooks.mjs'), 'wait']]
    : ['/bin/sh', ['-c', command]];
  const proc = spawn(file, args, {
    env: {
      PATH: process.env.PATH!,
      CLAUDE_PROJECT_DIR: p.dir,
      CLAUDE_PID: String(claude.pid),
      CLAUDE_CODE_ENTRYPOINT: 'cli',
      TMPDIR: p.at('tmp'),
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  proc.stdin!.end(
    JSON.stringify({ hook_event_name: 'Stop', session_id: 'claude-1', cwd: p.dir, stop_hook_active: false }),
  );
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  const exit = new Promise<number | null>((r) => proc.on('exit', (c) => r(c)));
  return { proc, stderr: () => err, exit };
}

/** The runner's pid, once it registered as Claude Code's waiter (wake.ts Registration). */
async function runnerPid(claude: ChildProcess): Promise<number> {
  const file = p.at(`tmp/opencomms-${process.getuid!()}/wake-${claude.pid}.pid`);
  for (const end = Date.now() + 5000; Date.now() < end; await new Promise((r) => setTimeout(r, 20)))
    if (existsSync(file)) return Number(readFileSync(file, 'utf8'));
  throw new Error('the runner did not register');
}

const running = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const within = <T>(pr: Promise<T>, ms: number) =>
  Promise.race([pr, new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms))]);

async function bound(): Promise<Runtime> {
  const { mkdir } = await import('node:fs/promises');
  await mkdir(p.at('tmp'), { recursive: true });
  await install('claude-code', p.dir, { detect: async () => 'x', warn: () => {} });
  await installMember(p.dir, { id: 'sess_me' });
  const rt = openRuntime(p.dir, { log: () => {} });
  const caller = (sid: string) => ({
    session_id: sid,
    host: 'claude-code',
    surface: 'mcp',
    delivery_mode: 'pull',
    host_session_id: null,
    project_id: 'local-project',
    worktree: p.dir,
  });
  await rt.run({
    op: 'create',
    caller: caller('sess_peer'),
    args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.' },
  });
  await rt.run({
    op: 'join',
    caller: caller('sess_me'),
    args: { channel: 'team', role: 'Worker', role_prompt: 'Work.' },
  });
  await rt.run({ op: 'bind', member: 'sess_me', host: 'claude-code', host_session_id: 'claude-1' });
  return rt;
}

const send = async (rt: Runtime, content: string) =>
  (
    (await rt.run({ op: 'send', sid: 'sess_peer', args: { channel: 'team', content } })).data as {
      message_ids: string[];
    }
  ).message_ids[0]!;

describe('the wake waiter', () => {
  it('waits through a pause and a stale mark, then wakes once with the framed batch held in flight under Claude Code', async () => {
    const rt = await bound();
    const claude = fakeClaude();
    try {
      // Mail waits while the channel is paused and the member stale (both refuse new sends, so the
      // mail came first).
      const id = await send(rt, 'while you were away');
      await rt.run({ op: 'pause', sid: 'sess_peer', args: { channel: 'team' } });
      await rt.run({ op: 'mark_stale', session: 'claude-1' });
      const w = waiter(claude);
      expect(await within(w.exit, 1500)).toBe('pending'); // paused and stale: held
      await rt.run({ op: 'clear_stale', session: 'claude-1' });
      expect(await within(w.exit, 1500)).toBe('pending'); // still paused
      await rt.run({ op: 'resume', sid: 'sess_peer', args: { channel: 'team' } });
      expect(await within(w.exit, 5000)).toBe(2);
      expect(w.stderr()).toContain(`| id: ${id} |`);
      expect(w.stderr()).toContain(
        '<<<UNTRUSTED_PEER_MESSAGE>>>\nwhile you were away\n<<<END_UNTRUSTED_PEER_MESSAGE>>>',
      );
      expect((await rt.read()).messages[id]).toMatchObject({
        delivery_status: 'in_flight',
        in_flight_by: processTag(claude.pid!),
        attempts: 1,
      });
      // The next waiter (the woken turn's Stop) does not wake again for the same mail.
      const next = waiter(claude);
      expect(await within(next.exit, 1500)).toBe('pending');
      process.kill(await runnerPid(claude), 'SIGTERM'); // as a newer waiter stops it
      expect(await next.exit).toBe(0);
    } finally {
      claude.kill('SIGKILL');
      await rt.close();
    }
  }, 20_000);

  it('a newer waiter takes over: the older one exits 0 and only the newer wakes', async () => {
    const rt = await bound();
    const claude = fakeClaude();
    try {
      const older = waiter(claude);
      await new Promise((r) => setTimeout(r, 800));
      const newer = waiter(claude);
      expect(await within(older.exit, 5000)).toBe(0);
      await send(rt, 'for the newest waiter');
      expect(await within(newer.exit, 5000)).toBe(2);
      expect(older.stderr()).toBe('');
    } finally {
      claude.kill('SIGKILL');
      await rt.close();
    }
  }, 20_000);

  it('when Claude Code is killed the waiter leaves within a second or two and takes no mail', async () => {
    const rt = await bound();
    const claude = fakeClaude();
    const w = waiter(claude);
    await new Promise((r) => setTimeout(r, 800));
    claude.kill('SIGKILL');
    expect(await within(w.exit, 4000)).toBe(0);
    const id = await send(rt, 'nobody is listening');
    expect((await rt.read()).messages[id]).toMatchObject({ delivery_status: 'pending', attempts: 0 });
    await rt.close();
  }, 20_000);

  it("the hook's process exits 2 with the batch; run bare, as an earlier install ran it, the runner does so itself", async () => {
    const rt = await bound();
    const claude = fakeClaude();
    const later = fakeClaude();
    try {
      const shelled = waiter(claude);
      const runner = await runnerPid(claude);
      expect(runner).not.toBe(shelled.proc.pid);
      const id = await send(rt, 'through the shell');
      expect(await within(shelled.exit, 5000)).toBe(2);
      expect(shelled.stderr()).toContain(`| id: ${id} |`);
      // The woken turn commits the batch, as its hook does; then a waiter run bare.
      const done = await rt.run({
        op: 'commit',
        rid: 'sess_me',
        message_ids: [id],
        method: 'push',
        held: { by: processTag(claude.pid!), attempts: [1] },
      });
      expect(done.ok).toBe(true);
      const bare = waiter(later, {}, true);
      expect(await runnerPid(later)).toBe(bare.proc.pid);
      const again = await send(rt, 'bare');
      expect(await within(bare.exit, 5000)).toBe(2);
      expect(bare.stderr()).toContain(`| id: ${again} |`);
    } finally {
      claude.kill('SIGKILL');
      later.kill('SIGKILL');
      await rt.close();
    }
  }, 20_000);

  it("when the hook's shell is killed (its timeout) the runner leaves within a second or two and takes no mail", async () => {
    const rt = await bound();
    const claude = fakeClaude();
    try {
      const w = waiter(claude);
      const runner = await runnerPid(claude);
      w.proc.kill('SIGKILL');
      await w.exit;
      for (const end = Date.now() + 4000; running(runner) && Date.now() < end; )
        await new Promise((r) => setTimeout(r, 50));
      expect(running(runner)).toBe(false);
      const id = await send(rt, 'nobody waits on this hook');
      await new Promise((r) => setTimeout(r, 500));
      expect((await rt.read()).messages[id]).toMatchObject({ delivery_status: 'pending', attempts: 0 });
    } finally {
      claude.kill('SIGKILL');
      await rt.close();
    }
  }, 20_000);

  it('does not arm under claude -p or the SDKs (they wait for async hooks before exiting)', async () => {
    const rt = await bound();
    const claude = fakeClaude();
    try {
      const w = waiter(claude, { CLAUDE_CODE_ENTRYPOINT: 'sdk-cli' });
      expect(await within(w.exit, 3000)).toBe(0);
      const id = await send(rt, 'not for -p');
      expect((await rt.read()).messages[id]!.delivery_status).toBe('pending');
    } finally {
      claude.kill('SIGKILL');
      await rt.close();
    }
  });
});
