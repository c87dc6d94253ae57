// The wake guard on two real interactive Claude Code 2.1.332 sessions (tmux, offline, each with its
// own member, MCP server and wake waiter). Each session's fake model answers EVERY OpenComms message
// it is shown with a NEW opencomms_send to the other member (no reply_to, a polite text that never
// repeats): without a guard one operator message starts a conversation that never ends. With the
// guard (docs: wake chain, LOOP_WAKES = 6): at most six turns started by OpenComms, then the next
// wake is held and stays held; the held mail is not lost: a prompt the person types into the held
// session hands it over once, in order, after OpenComms' notice line ("… held … by the loop
// guard …"); every message of the channel reached its recipient's model exactly once.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { opencomms, until } from './claude-harness.ts';
import { useCleanups } from './cleanups.ts';
import { bin, configureClaude, trustClaudeProject } from './env.ts';
import { startFakeAnthropic, type FakeServer } from './fake/index.ts';
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
import { startTerminal, type Terminal } from './tmux.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;
/** The waiter's asyncRewake text (adapters/claude-code/install.ts `rewakeMessage`): a turn it started. */
const WOKEN = 'OpenComms delivered new mail from your channel peers:';
const SEND = 'mcp__opencomms__opencomms_send';

interface Session {
  rid: string;
  role: string;
  fake: FakeServer;
  term: Terminal;
  log: ModelLog;
  hookLog: string;
}

/** Requests of a session that a wake started (the waiter's text is the newest input). */
const wakesOf = (s: Session) => s.fake.turns().filter((r) => newestInput(r).includes(WOKEN));

describe('Claude Code 2.1.332, interactive: two polite sessions and the wake guard', () => {
  it('a politeness loop gets at most six woken turns, then stays held; a typed prompt hands the held mail over once, in order, after the notice', async () => {
    const t0 = Date.now();
    const sb = sandbox('oc-loop-claude');
    // Runs after every terminal or server is closed, before the sandbox goes.
    defer(sb.root, settleProcesses);
    const A = pin(),
      B = pin();
    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install-member', '--id', A);
    await opencomms(sb, 'install-member', '--id', B);

    const sessions: Session[] = [];
    for (const [rid, role, other, start] of [
      [
        A,
        'Alpha',
        'Beta',
        `CALL mcp__opencomms__opencomms_create ${JSON.stringify({ channel: CHANNEL, role: 'Alpha', role_prompt: 'You are Alpha. Answer every message.', rate_limit: 200 })}`,
      ],
      [
        B,
        'Beta',
        'Alpha',
        `CALL mcp__opencomms__opencomms_join ${JSON.stringify({ channel: CHANNEL, role: 'Beta', role_prompt: 'You are Beta. Answer every message.' })}`,
      ],
    ] as const) {
      const log: ModelLog = { seen: [], answers: [] };
      const line = politeModel({ send: SEND, to: other, name: role, start: { marker: '[start]', line: start }, log });
      const fake = defer(await startFakeAnthropic(Array.from({ length: 150 }, () => line)), (f) => f.close());
      const hookLog = join(sb.root, `hooks-${role}.log`);
      const env = { ...configureClaude(sb, fake), OPENCOMMS_MEMBER_ID: rid, OPENCOMMS_HOOK_LOG: hookLog };
      trustClaudeProject(sb, env, ['opencomms']);
      const term = defer(
        await startTerminal(bin('claude'), ['--model', 'claude-sonnet-4-5'], {
          cwd: sb.proj,
          env,
          timeoutMs: 600_000,
          forward: [fake.port],
        }),
        (t) => t.close(),
      );
      await term.waitScreen(/❯/, 40_000);
      term.type(`[start] ${role === 'Alpha' ? 'create' : 'join'} the team channel`);
      await until(
        `${role} is in the channel and its session bound`,
        () => state(sb.proj)?.channels?.[CHANNEL]?.members.find((m: any) => m.session_id === rid)?.host_session_id,
        40_000,
        () => term.screen(),
      );
      sessions.push({ rid, role, fake, term, log, hookLog });
      // tmux sockets are named by the millisecond: the next terminal gets its own.
      await sleep(5);
    }
    const [alpha, beta] = sessions as [Session, Session];
    const info = () =>
      [
        `envelopes:\n${describeEnvelopes(sb.proj)}`,
        `guard: ${guardState(sb.proj)}`,
        ...sessions.map(
          (s) =>
            `${s.role} fake turns:\n${s.fake
              .turns()
              .map(
                (r) =>
                  `  ${r.at - t0} ${r.endsWithToolResult ? 'tool' : 'input'} ${JSON.stringify(newestInput(r).slice(-140))} -> ${JSON.stringify(r.reply).slice(0, 140)}`,
              )
              .join(
                '\n',
              )}\n${s.role} hooks.log:\n${existsSync(s.hookLog) ? readFileSync(s.hookLog, 'utf8').slice(-3000) : ''}\n${s.role} screen:\n${s.term.screen()}`,
        ),
      ].join('\n');
    // Both waiters armed (the start turns are over) before the loop starts.
    await sleep(1500);
    const ready = Date.now();

    // One operator message to Alpha starts it.
    await opencomms(sb, 'send', CHANNEL, 'Hello Alpha, please greet Beta.', '--to', 'Alpha');
    const wakes = () => wakesOf(alpha).length + wakesOf(beta).length;
    const outcome = await until(
      'the guard holds a wake (or the loop passes twice the limit)',
      () => {
        const held = heldMember(state(sb.proj));
        if (held) return { held };
        return wakes() >= 2 * LOOP_WAKES ? { held: null } : false;
      },
      120_000,
      info,
    );
    const heldAfterMs = Date.now() - ready;
    const wakesAtHold = { Alpha: wakesOf(alpha).length, Beta: wakesOf(beta).length };
    console.log(
      `[loop-claude] ${outcome.held ? `held (${outcome.held.by}) ${heldAfterMs} ms after the operator's message` : 'NOT held'}; woken turns Alpha ${wakesAtHold.Alpha}, Beta ${wakesAtHold.Beta}; sends Alpha ${alpha.log.answers.length}, Beta ${beta.log.answers.length}`,
    );
    expect(outcome.held, `no hold after ${wakes()} woken turns\n${info()}`).not.toBeNull();
    expect(outcome.held!.by).toBe('loop');
    expect(wakes(), info()).toBeLessThanOrEqual(LOOP_WAKES);

    // It stays held: no further request reaches either model, the hold is still there.
    // The turns running when it held end (the last sender's turn end); from then on nothing moves.
    const turnsAtHold = await quiet(() => alpha.fake.turns().length + beta.fake.turns().length);
    const wakesAtQuiet = wakes();
    expect(wakesAtQuiet, info()).toBeLessThanOrEqual(LOOP_WAKES);
    const writes = countWrites(sb.proj);
    await sleep(HELD_WATCH_MS);
    const written = writes.stop();
    console.log(`[loop-claude] state writes in the ${HELD_WATCH_MS / 1000} s held: ${written}`);
    // Held is quiet: no process re-drains the held mail in a loop (each drain would write).
    expect(written, `state writes while held\n${info()}`).toBeLessThanOrEqual(10);
    expect(alpha.fake.turns().length + beta.fake.turns().length, info()).toBe(turnsAtHold);
    expect(wakes(), info()).toBe(wakesAtQuiet);
    expect(heldMember(state(sb.proj)), info()).toEqual(outcome.held);
    const st = state(sb.proj);
    for (const s of sessions) {
      const ledger = ledgerWakes(st, s.rid);
      if (ledger !== null) expect(ledger, `${s.role}: the ledger's wakes`).toBe(wakesOf(s).length);
    }

    // The held mail: pending, in the held member's queue, in the order sent.
    const heldSession = sessions.find((s) => s.rid === outcome.held!.rid)!;
    const heldIds: string[] = [...(st.queues?.[heldSession.rid] ?? [])];
    expect(heldIds.length, info()).toBeGreaterThan(0);
    for (const id of heldIds) expect(st.messages[id], id).toMatchObject({ delivery_status: 'pending' });

    // The person types into the held session: its UserPromptSubmit hook hands the held mail over.
    heldSession.term.type(`${PERSON} anything new from the team?`);
    const typed = await until(
      `${heldSession.role}'s model gets the typed prompt`,
      () => heldSession.fake.turns().find((r) => newestInput(r).includes(PERSON)),
      30_000,
      info,
    );
    const handed = newestInput(typed);
    console.log(`[loop-claude] hand-over at the typed prompt:\n${handed.slice(0, 1500)}`);
    expect(checkHandOver(handed, heldIds), info()).toEqual([]);
    await until(
      'the held mail is delivered',
      () => {
        const s = state(sb.proj);
        return heldIds.every((id) => !s?.messages?.[id] || s.messages[id].delivery_status === 'delivered');
      },
      15_000,
      info,
    );
    // The person's turn (the model only read) starts nothing more.
    await until('the typed turn is over', () => !!typed.repliedAt, 15_000, info);
    const turnsAfter = alpha.fake.turns().length + beta.fake.turns().length;
    await sleep(5000);
    expect(alpha.fake.turns().length + beta.fake.turns().length, info()).toBe(turnsAfter);
    expect(heldMember(state(sb.proj)), info()).toBeNull();

    // Nothing lost, nothing shown twice: every message of the channel is in its recipient's
    // conversation exactly once, and delivered.
    expect(
      checkNoLossNoDup(
        sb.proj,
        sessions.map((s) => ({ rid: s.rid, role: s.role, final: () => s.fake.turns().at(-1) })),
      ),
      info(),
    ).toEqual([]);
    const all = sessions.flatMap((s) => frameIds(JSON.stringify(s.fake.turns().at(-1)?.body.messages ?? [])));
    console.log(
      `[loop-claude] ${new Set(all).size} messages, each read once; requests the fakes got: Alpha ${alpha.fake.turns().length}, Beta ${beta.fake.turns().length}; test ${Date.now() - t0} ms`,
    );
  }, 300_000);
});
