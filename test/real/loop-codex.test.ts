// The wake guard on two real Codex 0.171.0 TUIs started with `opencomms codex` (tmux, offline, as
// codex-wake.test.ts), each its own member (OPENCOMMS_MEMBER_ID) with its own CODEX_HOME, so each
// has its own Codex background server, whose MCP server and hooks run as that member. Each
// session's fake model answers EVERY OpenComms message it is shown (a wake's hook context, a pull's
// result after Codex's Stop notice) with a NEW opencomms_send to the other member. Without a guard
// one operator message starts a conversation that never ends; with it: at most six turns started by
// OpenComms, then the next wake is held and stays held; a prompt the person types into the held
// session hands the held mail over once, in order, after OpenComms' notice line; every message of
// the channel reached its recipient's model exactly once.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { OPENCOMMS, opencomms, until } from './claude-harness.ts';
import { useCleanups } from './cleanups.ts';
import { trustCodexHooks } from './codex-review.ts';
import { bin, configureCodex, trustCodexProject, type Sandbox } from './env.ts';
import { startFakeResponses, type FakeServer } from './fake/index.ts';
import { newestInput } from './limits-harness.ts';
import {
  CHANNEL,
  HELD_WATCH_MS,
  LOOP_WAKES,
  PERSON,
  checkHandOver,
  checkNoLossNoDup,
  describeEnvelopes,
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
/** The launcher's fixed wake prompt (adapters/codex/wake-trigger.ts): a turn OpenComms started. */
const WOKEN = '[OpenComms] New messages for this session arrived (wake ';

/** Codex background servers whose command line names `codexHome` (stopped in cleanup). */
function daemons(codexHome: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => {
      try {
        const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        return cmd.includes(codexHome) && cmd.includes('app-server');
      } catch {
        return false;
      }
    });
}

/** The `opencomms codex` launchers of this project: pid, scheduler state (R = running) and CPU
 *  seconds so far (a launcher whose event loop spins passes no keystroke). */
function launchers(root: string): Array<{ pid: number; state: string; cpu_s: number }> {
  const out: Array<{ pid: number; state: string; cpu_s: number }> = [];
  for (const p of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ');
      const env = readFileSync(`/proc/${p}/environ`, 'utf8');
      if (!/opencomms\.js codex/.test(cmd) || !env.includes(root)) continue;
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(p), state: f[0]!, cpu_s: (Number(f[11]) + Number(f[12])) / 100 });
    } catch {
      // gone
    }
  }
  return out;
}

/** Types like a person: the text, a breath, then Enter (Codex reads a burst ending in Enter as a paste). */
async function submit(term: Terminal, text: string) {
  term.keys('-l', text);
  await sleep(300);
  term.keys('Enter');
}

interface Session {
  rid: string;
  role: string;
  fake: FakeServer;
  term: Terminal;
  log: ModelLog;
  launcherLog: string;
}

const wakesOf = (s: Session) => s.fake.turns().filter((r) => newestInput(r).includes(WOKEN));

describe('Codex 0.171.0 TUI through `opencomms codex`: two polite sessions and the wake guard', () => {
  it('a politeness loop gets at most six woken turns, then stays held; a typed prompt hands the held mail over once, in order, after the notice', async () => {
    const t0 = Date.now();
    const sb = sandbox('oc-loop-codex');
    // Runs after every terminal or server is closed, before the sandbox goes.
    defer(sb.root, settleProcesses);
    const A = pin(),
      B = pin();
    await opencomms(sb, 'install', 'codex');
    await opencomms(sb, 'install-member', '--host', 'codex', '--id', A);
    await opencomms(sb, 'install-member', '--host', 'codex', '--id', B);
    // The user's approval of the server's tools (send, and pull when Codex's Stop notice asks).
    const config = join(sb.proj, '.codex', 'config.toml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace(
        '[mcp_servers.opencomms]\n',
        '[mcp_servers.opencomms]\ndefault_tools_approval_mode = "approve"\n',
      ),
    );
    // The channel, and both members in it, as their MCP servers would make them; a rate limit
    // above the default 20 a minute, so that only the guard can end the loop.
    const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
    const caller = (sid: string) => ({
      session_id: sid,
      host: 'codex',
      surface: 'mcp' as const,
      delivery_mode: 'pull' as const,
      host_session_id: null,
      project_id: 'local-project',
      worktree: sb.proj,
    });
    const created = await rt.run({
      op: 'create',
      caller: caller(A),
      args: { channel: CHANNEL, role: 'Alpha', role_prompt: 'You are Alpha. Answer every message.', rate_limit: 200 },
    });
    expect(created.ok, created.message).toBe(true);
    const joined = await rt.run({
      op: 'join',
      caller: caller(B),
      args: { channel: CHANNEL, role: 'Beta', role_prompt: 'You are Beta. Answer every message.' },
    });
    expect(joined.ok, joined.message).toBe(true);
    await rt.close();

    const sessions: Session[] = [];
    for (const [rid, role, other] of [
      [A, 'Alpha', 'Beta'],
      [B, 'Beta', 'Alpha'],
    ] as const) {
      const log: ModelLog = { seen: [], answers: [] };
      const line = politeModel({
        send: 'mcp__opencomms__opencomms_send',
        pull: 'mcp__opencomms__opencomms_pull',
        to: other,
        name: role,
        log,
      });
      const fake = defer(await startFakeResponses(Array.from({ length: 150 }, () => line)), (f) => f.close());
      // Each session its own HOME and CODEX_HOME: its own background server, started by its own
      // launcher's Codex with the session's environment (OPENCOMMS_MEMBER_ID), in its namespace.
      const home = join(sb.root, `home-${role}`);
      mkdirSync(home, { recursive: true });
      const own: Sandbox = { ...sb, home, env: { ...sb.env, HOME: home } };
      const env = configureCodex(own, fake);
      trustCodexProject(own, env);
      defer(null, () => {
        for (const p of daemons(env.CODEX_HOME!)) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {
            // gone
          }
        }
      });
      const launcherLog = join(sb.root, `launcher-${role}.log`);
      const term = defer(
        await startTerminal(process.execPath, [OPENCOMMS, 'codex'], {
          cwd: sb.proj,
          env: {
            ...env,
            TERM: 'xterm-256color',
            OPENCOMMS_MEMBER_ID: rid,
            OPENCOMMS_CODEX_BIN: bin('codex'),
            OPENCOMMS_LAUNCHER_LOG: launcherLog,
          },
          timeoutMs: 600_000,
          forward: [fake.port],
          cols: 120,
          rows: 40,
        }),
        (t) => t.close(),
      );
      await trustCodexHooks(term, env.CODEX_HOME!);
      // The first prompt binds the thread (Codex runs SessionStart lazily, at the first prompt).
      await submit(term, 'hello');
      await until(
        `${role}'s thread is bound`,
        () => state(sb.proj)?.channels?.[CHANNEL]?.members.find((m: any) => m.session_id === rid)?.host_session_id,
        40_000,
        () => `${term.screen()}\n${existsSync(launcherLog) ? readFileSync(launcherLog, 'utf8') : ''}`,
      );
      await until(
        'the first turn is over',
        () => !/esc to interrupt/.test(term.screen()),
        30_000,
        () => term.screen(),
      );
      sessions.push({ rid, role, fake, term, log, launcherLog });
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
                  `  ${r.at - t0} ${r.endsWithToolResult ? 'tool' : 'input'} ${JSON.stringify(newestInput(r).slice(0, 160))} -> ${JSON.stringify(r.reply).slice(0, 140)}`,
              )
              .join(
                '\n',
              )}\n${s.role} launcher.log:\n${existsSync(s.launcherLog) ? readFileSync(s.launcherLog, 'utf8').slice(-3000) : ''}\n${s.role} screen:\n${s.term.screen()}`,
        ),
      ].join('\n');
    await sleep(1500);
    const ready = Date.now();

    await opencomms(sb, 'send', CHANNEL, 'Hello Alpha, please greet Beta.', '--to', 'Alpha');
    const wakes = () => wakesOf(alpha).length + wakesOf(beta).length;
    const outcome = await until(
      'the guard holds a wake (or the loop passes twice the limit)',
      () => {
        const held = heldMember(state(sb.proj));
        if (held) return { held };
        return wakes() >= 2 * LOOP_WAKES ? { held: null } : false;
      },
      150_000,
      info,
    );
    const heldAfterMs = Date.now() - ready;
    console.log(
      `[loop-codex] ${outcome.held ? `held (${outcome.held.by}) ${heldAfterMs} ms after the operator's message` : 'NOT held'}; woken turns Alpha ${wakesOf(alpha).length}, Beta ${wakesOf(beta).length}; sends Alpha ${alpha.log.answers.length}, Beta ${beta.log.answers.length}`,
    );
    expect(outcome.held, `no hold after ${wakes()} woken turns\n${info()}`).not.toBeNull();
    expect(outcome.held!.by).toBe('loop');
    expect(wakes(), info()).toBeLessThanOrEqual(LOOP_WAKES);

    // It stays held.
    // The turns running when it held end (the last sender's turn end); from then on nothing moves.
    const turnsAtHold = await quiet(() => alpha.fake.turns().length + beta.fake.turns().length);
    const wakesAtQuiet = wakes();
    expect(wakesAtQuiet, info()).toBeLessThanOrEqual(LOOP_WAKES);
    const writes = countWrites(sb.proj);
    await sleep(HELD_WATCH_MS);
    const written = writes.stop();
    console.log(`[loop-codex] state writes in the ${HELD_WATCH_MS / 1000} s held: ${written}`);
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
    const heldSession = sessions.find((s) => s.rid === outcome.held!.rid)!;
    const heldIds: string[] = [...(st.queues?.[heldSession.rid] ?? [])];
    expect(heldIds.length, info()).toBeGreaterThan(0);
    for (const id of heldIds) expect(st.messages[id], id).toMatchObject({ delivery_status: 'pending' });

    // The person types into the held session: its UserPromptSubmit hook hands the held mail over.
    // The launcher passes every key to Codex: the typed line shows in the composer before Enter.
    const typing = `${PERSON} anything new from the team?`;
    heldSession.term.keys('-l', typing);
    await heldSession.term
      .waitScreen(new RegExp(`› ${typing.replace(/[[\]?]/g, '\\$&')}`), 10_000)
      .catch((e: Error) => {
        throw new Error(
          `the typed line never reached Codex's composer (${e.message.split('\n')[0]}); launchers: ${JSON.stringify(launchers(sb.root))}\n${info()}`,
        );
      });
    await sleep(300);
    heldSession.term.keys('Enter');
    const typed = await until(
      `${heldSession.role}'s model gets the typed prompt`,
      () => heldSession.fake.turns().find((r) => newestInput(r).includes(PERSON)),
      30_000,
      info,
    );
    const handed = newestInput(typed);
    console.log(`[loop-codex] hand-over at the typed prompt:\n${handed.slice(0, 1500)}`);
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
    await until('the typed turn is over', () => !!typed.repliedAt, 15_000, info);
    const turnsAfter = alpha.fake.turns().length + beta.fake.turns().length;
    await sleep(5000);
    expect(alpha.fake.turns().length + beta.fake.turns().length, info()).toBe(turnsAfter);
    expect(heldMember(state(sb.proj)), info()).toBeNull();

    expect(
      checkNoLossNoDup(
        sb.proj,
        sessions.map((s) => ({ rid: s.rid, role: s.role, final: () => s.fake.turns().at(-1) })),
      ),
      info(),
    ).toEqual([]);
    console.log(
      `[loop-codex] requests the fakes got: Alpha ${alpha.fake.turns().length}, Beta ${beta.fake.turns().length}; test ${Date.now() - t0} ms`,
    );
  }, 360_000);
});
