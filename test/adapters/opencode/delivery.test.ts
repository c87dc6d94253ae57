// The OpenCode plugin on the shared delivery policy (FEATURES.md §5.5, §6.3, §6.4), with a fake
// host. Each case is a defect the plugin had before the policy moved into src/runtime:
//   - it adopted every ownerless member at start-up and never gave it back to the server that
//     hosts the session again;
//   - the one 2 s retry after a failed cross-server fallback never fired;
//   - kick and resume did not arm the 5 s fallback (only a send did).
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { openRuntime, processTag } from '../../../src/runtime/runtime.ts';
import { fakeClient, idle, loadPlugin, tool, type Prompted } from '../../helpers/opencode-fake.ts';

/** A project of its own per test (the cases run concurrently: each waits out real 5 s delays). */
async function project(ctx: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'oc-plugin-'));
  ctx.onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A push member whose OpenCode server is gone (its owner names a process that does not exist). */
async function ownerlessMember(dir: string, sid: string, role: string) {
  const rt = openRuntime(dir, { tag: processTag(2147483646), log: () => {} });
  const r = await rt.run({
    op: 'join',
    caller: {
      session_id: sid,
      host: 'opencode',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: sid,
      project_id: 'local-project',
      worktree: dir,
    },
    args: { channel: 'team', role, role_prompt: `${role}.` },
  });
  expect(r.ok, r.message).toBe(true);
  await rt.close();
}

const waitFor = async (ok: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!ok() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  return ok();
};

const to = (prompts: Prompted[], sid: string) => prompts.filter((p) => p.id === sid);

describe.concurrent('the plugin on the shared delivery policy', () => {
  it('hands an adopted session back when its own server claims it again: never prompted from here, busy or not', async (ctx) => {
    const dir = await project(ctx);
    const rt = openRuntime(dir, { log: () => {} }); // this process is server A
    const caller = (sid: string) => ({
      session_id: sid,
      host: 'opencode',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: sid,
      project_id: 'local-project',
      worktree: dir,
    });
    expect(
      (
        await rt.run({
          op: 'create',
          caller: caller('ses_a'),
          args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.' },
        })
      ).ok,
    ).toBe(true);
    await ownerlessMember(dir, 'ses_b', 'Worker');
    const ownerOfB = async () => (await rt.read()).channels.team!.members.find((m) => m.session_id === 'ses_b')!.owner;
    const a = fakeClient();
    const A = await loadPlugin(dir, a.client);
    // A's start-up finds ses_b alive in the shared database and nobody serving it: A adopts it.
    expect(await waitFor(() => false, 500)).toBe(false);
    expect(await ownerOfB()).toBe(processTag(process.pid));
    // Server B (another process) serves ses_b again, claims it, and its turn there is running.
    const b = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '..', '..', 'helpers', 'plugin-worker.ts'), dir, 'ses_b'],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const lines: string[] = [];
    b.stdout.setEncoding('utf8').on('data', (d: string) => lines.push(...d.split('\n').filter(Boolean)));
    try {
      expect(await waitFor(() => lines.includes('ready'), 20_000)).toBe(true);
      expect(await ownerOfB()).toBe(processTag(b.pid!));
      b.stdin.write('busy ses_b\n');
      expect(await waitFor(() => lines.includes('did busy ses_b'), 5000)).toBe(true);
      const sent = await tool(A, 'opencomms_send', { channel: 'team', content: 'for B, via its own server' }, 'ses_a');
      expect(sent.ok, sent.message).toBe(true);
      // A must not prompt a session that B serves (and that is busy there).
      expect(await waitFor(() => to(a.prompts, 'ses_b').length > 0, 1500)).toBe(false);
      b.stdin.write('idle ses_b\n');
      expect(await waitFor(() => lines.some((l) => l.includes('for B, via its own server')), 10_000)).toBe(true);
      expect(to(a.prompts, 'ses_b')).toEqual([]);
    } finally {
      b.kill('SIGTERM');
      await rt.close();
    }
  }, 40_000);

  it('retries a failed cross-server fallback once, 2 s later', async (ctx) => {
    const dir = await project(ctx);
    const a = fakeClient({ refuse: 1, unreachable: ['ses_b'] });
    const A = await loadPlugin(dir, a.client);
    expect(
      (await tool(A, 'opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'Lead.' }, 'ses_a')).ok,
    ).toBe(true);
    await ownerlessMember(dir, 'ses_b', 'Worker');
    const sent = await tool(A, 'opencomms_send', { channel: 'team', content: 'fallback me' }, 'ses_a');
    expect(sent.ok, sent.message).toBe(true);
    expect(await waitFor(() => to(a.prompts, 'ses_b').length >= 2, 12_000)).toBe(true);
    const [first, second] = to(a.prompts, 'ses_b');
    expect([first!.ok, second!.ok]).toEqual([false, true]);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1900);
    expect(second!.text).toContain('fallback me');
  }, 20_000);

  it('a kick notice to a session nobody serves is delivered by the 5 s fallback', async (ctx) => {
    const dir = await project(ctx);
    const a = fakeClient({ unreachable: ['ses_b'] });
    const A = await loadPlugin(dir, a.client);
    expect(
      (await tool(A, 'opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'Lead.' }, 'ses_a')).ok,
    ).toBe(true);
    await ownerlessMember(dir, 'ses_b', 'Worker');
    await ownerlessMember(dir, 'ses_c', 'Tester');
    const kickedAt = Date.now();
    const kicked = await tool(A, 'opencomms_kick', { channel: 'team', target_session_id: 'ses_c' }, 'ses_a');
    expect(kicked.ok, kicked.message).toBe(true);
    expect(await waitFor(() => to(a.prompts, 'ses_b').length > 0, 10_000)).toBe(true);
    const notice = to(a.prompts, 'ses_b')[0]!;
    expect(notice.text).toMatch(/Tester \(ses_c\) was removed/);
    expect(notice.at - kickedAt).toBeGreaterThanOrEqual(4900);
  }, 20_000);

  it('mail held by a pause is delivered by the 5 s fallback after resume', async (ctx) => {
    const dir = await project(ctx);
    const a = fakeClient({ unreachable: ['ses_b'] });
    const A = await loadPlugin(dir, a.client);
    expect(
      (await tool(A, 'opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'Lead.' }, 'ses_a')).ok,
    ).toBe(true);
    await ownerlessMember(dir, 'ses_b', 'Worker');
    expect((await tool(A, 'opencomms_send', { channel: 'team', content: 'held by the pause' }, 'ses_a')).ok).toBe(true);
    expect((await tool(A, 'opencomms_pause', { channel: 'team' }, 'ses_a')).ok).toBe(true);
    await new Promise((r) => setTimeout(r, 5600)); // the send's own fallback passes while paused
    expect(to(a.prompts, 'ses_b')).toEqual([]);
    expect((await tool(A, 'opencomms_resume', { channel: 'team' }, 'ses_a')).ok).toBe(true);
    expect(await waitFor(() => to(a.prompts, 'ses_b').length > 0, 8000)).toBe(true);
    expect(to(a.prompts, 'ses_b')[0]!.text).toContain('held by the pause');
  }, 25_000);

  it('an idle event still delivers at once to a session this server serves', async (ctx) => {
    const dir = await project(ctx);
    const a = fakeClient();
    const A = await loadPlugin(dir, a.client);
    expect(
      (await tool(A, 'opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'Lead.' }, 'ses_a')).ok,
    ).toBe(true);
    expect(
      (await tool(A, 'opencomms_join', { channel: 'team', role: 'Worker', role_prompt: 'Work.' }, 'ses_b')).ok,
    ).toBe(true);
    await idle(A, 'ses_b');
    const t = Date.now();
    expect((await tool(A, 'opencomms_send', { channel: 'team', content: 'local push' }, 'ses_a')).ok).toBe(true);
    expect(await waitFor(() => to(a.prompts, 'ses_b').length > 0, 3000)).toBe(true);
    expect(to(a.prompts, 'ses_b')[0]!.at - t).toBeLessThan(1000);
  });
});
