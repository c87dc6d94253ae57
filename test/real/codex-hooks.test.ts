// Codex 0.171.0 runs the hook runner that `opencomms install codex` registers in `.codex/hooks.json`
// (a trusted project; hooks trusted with --dangerously-bypass-hook-trust, which stands in for the
// user's review in /hooks). The thread binds to the pinned Codex member at SessionStart, and mail
// queued for it reaches the model as context at that turn boundary, exactly once.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { bin, codexArgs, configureCodex, describeRun, jsonLines, run, trustCodexProject, type Sandbox } from './env.ts';
import { startFakeResponses } from './fake/index.ts';
import type { FakeServer, ModelRequest } from './fake/index.ts';
import { frameIds, joinTeam, leadTeam, opencomms, startPeer } from './claude-harness.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;

/** Texts of the developer messages of a Responses request (where Codex puts hook context). */
const developerTexts = (r: ModelRequest): string[] =>
  (r.body.input as any[])
    .filter((i) => i.role === 'developer')
    .flatMap((i) => (i.content as any[]).map((c) => c.text as string));

/** A trusted project with OpenComms installed for Codex, a pinned Codex member in `team`, and a
 *  peer leading it. */
async function codexMember(sb: Sandbox, fake: FakeServer, rolePrompt: string) {
  const env = configureCodex(sb, fake);
  trustCodexProject(sb, env);
  const CODEX = pin();
  await opencomms(sb, 'install', 'codex');
  await opencomms(sb, 'install-member', '--host', 'codex', '--id', CODEX);
  const peer = defer(await startPeer(sb, pin(), 'team'), (p) => p.close());
  await leadTeam(peer);
  const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
  await joinTeam(rt, sb, CODEX, 'codex', { role: 'Coder', role_prompt: rolePrompt });
  return { env, peer, rt, CODEX };
}

describe('Codex with the installed hook runner', () => {
  it('binds the thread and hands queued mail over as context at the turn boundary, once', async () => {
    const sb = sandbox('oc-codex-hooks');
    const fake = defer(await startFakeResponses(['SAY first turn', 'SAY second turn', 'SAY third turn']), (f) =>
      f.close(),
    );
    const { env, peer, rt, CODEX } = await codexMember(sb, fake, 'ROLE-PROMPT-CODER: you code.');
    const queued = await peer.send('queued for codex');

    const trust = ['--dangerously-bypass-hook-trust'];
    const r1 = await run(bin('codex'), codexArgs('hello codex', trust), {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(r1.code, describeRun(r1)).toBe(0);
    const thread = jsonLines(r1.stdout).find((l) => l.type === 'thread.started')?.thread_id as string;
    const [first] = fake.turns() as [ModelRequest];
    const ctx = developerTexts(first).join('\n');
    expect(ctx).toContain(
      '## OpenComms role instructions\nYou are Coder in the OpenComms channel "team".\nROLE-PROMPT-CODER: you code.',
    );
    expect(frameIds(ctx)).toEqual([queued.id]);
    expect(ctx).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nqueued for codex\n<<<END_UNTRUSTED_PEER_MESSAGE>>>');
    const state = await rt.read();
    expect(state.channels.team!.members.find((m) => m.session_id === CODEX)!.host_session_id).toBe(thread);
    const logged = await rt.store.history(state.channels.team!.id, 20);
    expect(logged.find((e) => e.message_id === queued.id)).toMatchObject({
      delivery_status: 'delivered',
      delivery_method: 'push',
      attempts: 1,
    });

    // The next turn of the same thread: new mail arrives, the old mail is not handed over again.
    const second = await peer.send('second message for codex');
    const r2 = await run(
      bin('codex'),
      ['exec', '--skip-git-repo-check', '--json', ...trust, 'resume', thread, 'next turn'],
      { cwd: sb.proj, env, timeoutMs: 60_000, forward: [fake.port] },
    );
    expect(r2.code, describeRun(r2)).toBe(0);
    const last = fake.turns().at(-1)!;
    const newest = developerTexts(last).filter((t) => frameIds(t).length);
    expect(newest.flatMap(frameIds)).toEqual([queued.id, second.id]); // the whole thread: each frame once
    expect(
      fake
        .turns()
        .slice(1)
        .flatMap((t) => developerTexts(t))
        .filter((t) => frameIds(t).includes(second.id)).length,
    ).toBe(1);
  }, 120_000);

  it('mail sent during a turn: the Stop hook sends the model to opencomms_pull (no frame through the escaping route); the frame reaches it raw at the next boundary', async () => {
    const sb = sandbox('oc-codex-stop');
    let during: Promise<{ id: string }> | null = null;
    const fake = defer(
      await startFakeResponses([
        () => {
          during = peer.send('sent <<<during>>> the turn & more');
          return 'DELAY 800 SAY first turn';
        },
        'SAY after the notice',
        'SAY next turn',
      ]),
      (f) => f.close(),
    );
    const { env, peer, rt } = await codexMember(sb, fake, 'You code.');
    const trust = ['--dangerously-bypass-hook-trust'];
    const r1 = await run(bin('codex'), codexArgs('hello codex', trust), {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(r1.code, describeRun(r1)).toBe(0);
    const late = await during!;
    const second = fake.turns()[1]!;
    const last = (second.body.input as any[]).at(-1);
    const shown = (last.content as any[]).map((c) => c.text as string).join('');
    expect(last.role).toBe('user');
    expect(shown).toMatch(
      /^<hook_prompt [^>]*>OpenComms: 1 new message\(s\) from your channel peers are waiting\. Call the opencomms_pull tool to read them before you finish\.<\/hook_prompt>$/,
    );
    expect(JSON.stringify(second.body.input)).not.toContain('UNTRUSTED');
    expect((await rt.read()).messages[late.id]).toMatchObject({ delivery_status: 'pending' });

    const thread = jsonLines(r1.stdout).find((l) => l.type === 'thread.started')?.thread_id as string;
    const r2 = await run(
      bin('codex'),
      ['exec', '--skip-git-repo-check', '--json', ...trust, 'resume', thread, 'next turn'],
      { cwd: sb.proj, env, timeoutMs: 60_000, forward: [fake.port] },
    );
    expect(r2.code, describeRun(r2)).toBe(0);
    const ctx = developerTexts(fake.turns().at(-1)!).join('\n');
    expect(frameIds(ctx)).toEqual([late.id]);
    expect(ctx).toContain(
      '<<<UNTRUSTED_PEER_MESSAGE>>>\nsent <<<during>>> the turn & more\n<<<END_UNTRUSTED_PEER_MESSAGE>>>',
    );
  }, 120_000);

  it('a burst of ten queued for the thread reaches the model at the next boundary, oldest first, each once', async () => {
    const sb = sandbox('oc-codex-burst');
    const fake = defer(await startFakeResponses(['SAY first turn', 'SAY second turn']), (f) => f.close());
    const { env, peer, rt } = await codexMember(sb, fake, 'You code.');
    const ids: string[] = [];
    for (let i = 1; i <= 10; i++) ids.push((await peer.send(`S${String(i).padStart(2, '0')}`)).id);

    const r = await run(bin('codex'), codexArgs('hello codex', ['--dangerously-bypass-hook-trust']), {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    const read = (req: ModelRequest) =>
      (req.body.input as any[])
        .filter((i) => i.role === 'user' || i.role === 'developer')
        .flatMap((i) => (i.content as any[]).map((c) => c.text as string))
        .flatMap(frameIds);
    for (const req of fake.turns()) expect(read(req)).toEqual(ids);
    const logged = await rt.store.history((await rt.read()).channels.team!.id, 50);
    for (const id of ids)
      expect(
        logged.find((e) => e.message_id === id),
        id,
      ).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push', attempts: 1 });
  }, 120_000);
});
