// The wake guard on the real `opencode serve` (opencode-ai 1.18.33) with the OpenComms plugin
// installed by the real installer: two root sessions of one server, Alpha and Beta, each a push
// member, offline against a fake Chat Completions provider. Each session's fake model answers EVERY
// OpenComms message pushed to it with a NEW opencomms_send to the other member (no reply_to, a
// polite text that never repeats). Without a guard one operator message starts a conversation that
// never ends; with it: at most six turns started by OpenComms (pushes), then the next push is held
// and stays held; a prompt the person sends to the held session (what OpenCode's TUI sends) ends
// the hold, and the held mail reaches the model once, in order, after OpenComms' notice line (OpenCode
// has no hook that hands mail over at the person's turn itself: the push at that turn's end does,
// docs/hosts.md); every message of the channel reached its recipient's model exactly once.
import { describe, expect, it } from 'vitest';
import { opencomms } from './claude-harness.ts';
import { useCleanups } from './cleanups.ts';
import { lastPrompt, startFakeOpenAIChat, type ModelRequest } from './fake/index.ts';
import { newestInput } from './limits-harness.ts';
import {
  CHANNEL,
  HELD_WATCH_MS,
  LOOP_WAKES,
  PERSON,
  checkHandOver,
  checkNoLossNoDup,
  describeEnvelopes,
  frameIds,
  guardState,
  heldMember,
  ledgerWakes,
  countWrites,
  politeModel,
  quiet,
  settleProcesses,
  sleep,
  state,
  type ModelLog,
} from './loop-harness.ts';
import { setupProject, startServe, textOf, until } from './opencode-harness.ts';

const { defer, sandbox } = useCleanups();

describe('live OpenCode: two polite sessions and the wake guard', () => {
  it('a politeness loop gets at most six pushed turns, then stays held; a prompt hands the held mail over once, in order, after the notice', async () => {
    const t0 = Date.now();
    const sb = sandbox('oc-loop-opencode');
    // Runs after every terminal or server is closed, before the sandbox goes.
    defer(sb.root, settleProcesses);
    const logs: Record<'Alpha' | 'Beta', ModelLog> = {
      Alpha: { seen: [], answers: [] },
      Beta: { seen: [], answers: [] },
    };
    const line = (role: 'Alpha' | 'Beta') =>
      politeModel({
        send: 'opencomms_send',
        to: role === 'Alpha' ? 'Beta' : 'Alpha',
        name: role,
        start: {
          marker: role === 'Alpha' ? 'create the team channel' : 'join the team channel',
          line:
            role === 'Alpha'
              ? `CALL opencomms_create ${JSON.stringify({ channel: CHANNEL, role: 'Alpha', role_prompt: 'You are Alpha. Answer every message.', rate_limit: 200 })}`
              : `CALL opencomms_join ${JSON.stringify({ channel: CHANNEL, role: 'Beta', role_prompt: 'You are Beta. Answer every message.' })}`,
        },
        log: logs[role],
      });
    const lineA = line('Alpha'),
      lineB = line('Beta');
    // Conversations by marker: each session's first prompt names it (message contents never do).
    const fake = defer(
      await startFakeOpenAIChat({
        'CONV-A': Array.from({ length: 150 }, () => lineA),
        'CONV-B': Array.from({ length: 150 }, () => lineB),
      }),
      (f) => f.close(),
    );
    const env = setupProject(sb, fake);
    const s = defer(await startServe(sb, env, [fake]), (x) => x.stop());
    const A = (await s.api.createSession('alpha')).id;
    const B = (await s.api.createSession('beta')).id;
    expect(textOf(await s.api.prompt(A, 'CONV-A create the team channel'))).toBe('done');
    expect(textOf(await s.api.prompt(B, 'CONV-B join the team channel'))).toBe('done');
    const sessions = [
      { rid: A, role: 'Alpha', conv: 'CONV-A' },
      { rid: B, role: 'Beta', conv: 'CONV-B' },
    ];
    const turnsOf = (conv: string) => fake.turns().filter((r) => r.conversation === conv);
    /** Turns the plugin started: a pushed batch is the request's newest user text. */
    const pushesOf = (conv: string) =>
      turnsOf(conv).filter(
        (r) => !r.endsWithToolResult && frameIds(lastPrompt(r)).length > 0 && !lastPrompt(r).includes(PERSON),
      );
    const wakes = () => pushesOf('CONV-A').length + pushesOf('CONV-B').length;
    const info = () =>
      [
        `envelopes:\n${describeEnvelopes(sb.proj)}`,
        `guard: ${guardState(sb.proj)}`,
        `fake turns:\n${fake
          .turns()
          .map(
            (r: ModelRequest) =>
              `  ${r.at - t0} ${r.conversation} ${r.endsWithToolResult ? 'tool' : 'input'} ${JSON.stringify(newestInput(r).slice(0, 160))} -> ${JSON.stringify(r.reply).slice(0, 140)}`,
          )
          .join('\n')}`,
        `serve stderr:\n${s.proc
          .stderr()
          .split('\n')
          .filter((l) => l.includes('[opencomms]'))
          .slice(-30)
          .join('\n')}`,
      ].join('\n');
    await s.api.idle(A);
    await s.api.idle(B);
    const ready = Date.now();

    await opencomms(sb, 'send', CHANNEL, 'Hello Alpha, please greet Beta.', '--to', 'Alpha');
    const outcome = await until(
      (): { held: ReturnType<typeof heldMember> } | undefined => {
        const held = heldMember(state(sb.proj));
        if (held) return { held };
        return wakes() >= 2 * LOOP_WAKES ? { held: null } : undefined;
      },
      'the guard holds a push (or the loop passes twice the limit)',
      120_000,
      info,
    );
    const heldAfterMs = Date.now() - ready;
    console.log(
      `[loop-opencode] ${outcome.held ? `held (${outcome.held.by}) ${heldAfterMs} ms after the operator's message` : 'NOT held'}; pushed turns Alpha ${pushesOf('CONV-A').length}, Beta ${pushesOf('CONV-B').length}; sends Alpha ${logs.Alpha.answers.length}, Beta ${logs.Beta.answers.length}`,
    );
    expect(outcome.held, `no hold after ${wakes()} pushed turns\n${info()}`).not.toBeNull();
    expect(outcome.held!.by).toBe('loop');
    expect(wakes(), info()).toBeLessThanOrEqual(LOOP_WAKES);

    // It stays held.
    // The turns running when it held end (the last sender's turn end); from then on nothing moves.
    const turnsAtHold = await quiet(() => fake.turns().length);
    const wakesAtQuiet = wakes();
    expect(wakesAtQuiet, info()).toBeLessThanOrEqual(LOOP_WAKES);
    const writes = countWrites(sb.proj);
    await sleep(HELD_WATCH_MS);
    const written = writes.stop();
    console.log(`[loop-opencode] state writes in the ${HELD_WATCH_MS / 1000} s held: ${written}`);
    // Held is quiet: no process re-drains the held mail in a loop (each drain would write).
    expect(written, `state writes while held\n${info()}`).toBeLessThanOrEqual(10);
    expect(fake.turns().length, info()).toBe(turnsAtHold);
    expect(wakes(), info()).toBe(wakesAtQuiet);
    expect(heldMember(state(sb.proj)), info()).toEqual(outcome.held);
    const st = state(sb.proj);
    for (const x of sessions) {
      const ledger = ledgerWakes(st, x.rid);
      if (ledger !== null) expect(ledger, `${x.role}: the ledger's wakes`).toBe(pushesOf(x.conv).length);
    }
    const heldSession = sessions.find((x) => x.rid === outcome.held!.rid)!;
    const heldIds: string[] = [...(st.queues?.[heldSession.rid] ?? [])];
    expect(heldIds.length, info()).toBeGreaterThan(0);
    for (const id of heldIds) expect(st.messages[id], id).toMatchObject({ delivery_status: 'pending' });

    // The person prompts the held session (as OpenCode's TUI does, over the server's HTTP API).
    // OpenCode has no hook that hands mail over at that turn: the turn the plugin did not prompt
    // ends the hold, and the held mail comes with the notice, at that turn or pushed at its end.
    const before = turnsOf(heldSession.conv).length;
    await s.api.promptAsync(heldSession.rid, `${PERSON} anything new from the team?`);
    const typed = await until(
      () => turnsOf(heldSession.conv).find((r) => newestInput(r).includes(PERSON)),
      `${heldSession.role}'s model gets the typed prompt`,
      30_000,
      info,
    );
    const carries = (r: ModelRequest) =>
      !r.endsWithToolResult && heldIds.some((id) => frameIds(newestInput(r)).includes(id));
    const carrier = await until(
      () => turnsOf(heldSession.conv).slice(before).find(carries),
      `the held mail reaches ${heldSession.role}'s model after the person's prompt`,
      30_000,
      info,
    );
    const handed = newestInput(carrier);
    console.log(
      `[loop-opencode] hand-over ${carrier === typed ? 'at the prompt' : `pushed ${carrier.at - typed.at} ms after the prompt's request`}:\n${handed.slice(0, 1500)}`,
    );
    expect(checkHandOver(handed, heldIds), info()).toEqual([]);
    await until(
      () => {
        const now = state(sb.proj);
        return heldIds.every((id) => !now?.messages?.[id] || now.messages[id].delivery_status === 'delivered');
      },
      'the held mail is delivered',
      15_000,
      info,
    );
    await s.api.idle(heldSession.rid);
    const turnsAfter = fake.turns().length;
    await sleep(5000);
    expect(fake.turns().length, info()).toBe(turnsAfter);
    expect(heldMember(state(sb.proj)), info()).toBeNull();
    expect(turnsOf(heldSession.conv).slice(before).filter(carries), 'one request carries the held mail').toHaveLength(
      1,
    );

    expect(
      checkNoLossNoDup(
        sb.proj,
        sessions.map((x) => ({ rid: x.rid, role: x.role, final: () => turnsOf(x.conv).at(-1) })),
      ),
      info(),
    ).toEqual([]);
    console.log(
      `[loop-opencode] requests the fake got: Alpha ${turnsOf('CONV-A').length}, Beta ${turnsOf('CONV-B').length}; test ${Date.now() - t0} ms`,
    );
  }, 240_000);
});
