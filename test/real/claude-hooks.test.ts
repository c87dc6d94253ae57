// `claude -p` (Claude Code 2.1.332) with the hooks OpenComms installs: mail queued for the member
// arrives as additional context at the session's start, mail that comes while the turn runs is
// handed over by the Stop hook (the turn continues with it), rendered once; the wake waiter, which
// `-p` would wait for, steps aside at once so the run ends on its own.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { bin, claudeArgs, configureClaude, describeRun, jsonLines, run, trustClaudeProject } from './env.ts';
import { startFakeAnthropic } from './fake/index.ts';
import type { ModelRequest } from './fake/index.ts';
import { frameIds, joinTeam, leadTeam, newestUserText, opencomms, startPeer } from './claude-harness.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;

describe('claude -p with the installed hooks', () => {
  it('SessionStart context carries the queued mail; Stop continues the turn with mail that came during it; each once, as rendered', async () => {
    const sb = sandbox('oc-hooks-p');
    const CLAUDE = pin(),
      PEER = pin();
    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install-member', '--id', CLAUDE);
    let during: Promise<{ id: string }> | null = null;
    const fake = defer(
      await startFakeAnthropic([
        // First request: the peer sends again while this turn runs (a slow model), then the turn ends.
        (req: ModelRequest) => {
          during = peer.send('sent during the turn');
          void req;
          return 'DELAY 800 SAY first answer';
        },
        'SAY second answer',
        'SAY third answer',
      ]),
      (f) => f.close(),
    );
    const env = configureClaude(sb, fake);
    trustClaudeProject(sb, env, ['opencomms']);
    const peer = defer(await startPeer(sb, PEER, 'team'), (p) => p.close());
    await leadTeam(peer);
    // The member joined earlier (as its MCP server does: host claude-code, pull, not yet bound).
    const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
    await joinTeam(rt, sb, CLAUDE, 'claude-code', { role: 'Builder', role_prompt: 'ROLE-PROMPT-BUILDER: you build.' });
    const queued = await peer.send('queued before the session started');

    const r = await run(bin('claude'), claudeArgs('hello', { maxTurns: 4, persist: true }), {
      cwd: sb.proj,
      env,
      timeoutMs: 60_000,
      forward: [fake.port],
    });
    expect(r.code, describeRun(r)).toBe(0);
    expect(r.ms, 'the waiter must not keep -p alive').toBeLessThan(30_000);
    const turns = fake.turns();
    expect(turns.length, describeRun(r)).toBe(2);
    const [first, second] = turns as [ModelRequest, ModelRequest];
    const all = first.userTexts.join('\n');
    expect(all).toContain(
      'SessionStart hook additional context: ## OpenComms role instructions\nYou are Builder in the OpenComms channel "team".\nROLE-PROMPT-BUILDER: you build.',
    );
    expect(frameIds(all)).toEqual([queued.id]);
    const late = await during!;
    // The Stop hook continues the turn with its context, which Claude Code renders once (a blocking
    // reason would be rendered twice): one hand-over, one frame in the request.
    expect(frameIds(newestUserText(second))).toEqual([late.id]);
    expect(newestUserText(second)).toContain('Stop hook additional context: [OpenComms] from Lead');
    expect(jsonLines(r.stdout).find((l) => l.type === 'result')?.result).toBe('second answer');

    // Each message delivered once, by a hook (`push`), and bound to this -p session.
    const sid = jsonLines(r.stdout).find((l) => l.type === 'system')?.session_id;
    const state = await rt.read();
    expect(state.channels.team!.members.find((m) => m.session_id === CLAUDE)!.host_session_id).toBe(sid);
    const logged = await rt.store.history(state.channels.team!.id, 50);
    for (const id of [queued.id, late.id])
      expect(
        logged.find((e) => e.message_id === id),
        id,
      ).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push', attempts: 1 });
  }, 90_000);
});
