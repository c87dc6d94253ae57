// Hosts that cut what they show: Codex 0.171.0 (real binary, offline): mail larger than
// a route shows whole must still reach the model whole. Measured (docs/hosts.md "What each route
// shows whole"): a hook's additionalContext is shown whole up to 10,000 UTF-8 bytes (beyond: head
// and tail around "…N tokens truncated…", the whole text saved under $TMPDIR/hook_outputs/); an MCP
// tool result up to 11,964 bytes of the tool's text (beyond: head and tail). The session is a Codex
// TUI started with `opencomms codex` (as codex-wake.test.ts), woken with its mail (the woken turn's
// UserPromptSubmit hook hands the batch over). The fake model obeys OpenComms' own "… waiting …
// call opencomms_pull" line; the user has allowed opencomms_pull ("Always allow", as Codex writes it
// for approval_policy = "never"). Checked (limits-harness.ts `problems`): every message
// reconstructed whole from the frames the model saw, no frame it saw cut, delivered only what it
// saw whole, nothing lost, nothing shown twice, FIFO.
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { OPENCOMMS, joinTeam, leadTeam, opencomms, startPeer, until, type Defer } from './claude-harness.ts';
import { useCleanups } from './cleanups.ts';
import { trustCodexHooks } from './codex-review.ts';
import { bin, configureCodex, trustCodexProject, type Sandbox } from './env.ts';
import { startFakeResponses, type ModelRequest } from './fake/index.ts';
import { makeMessage, obeyPull, problems, sendMessage, statuses, summary, type Sent } from './limits-harness.ts';
import { startTerminal, type Terminal } from './tmux.ts';

const { defer, sandbox } = useCleanups();
const newPin = () => `sess_${randomBytes(12).toString('hex')}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Codex's background server processes of this sandbox (stopped in cleanup). */
function daemons(sb: Sandbox): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => {
      try {
        const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        return cmd.includes(join(sb.home, '.codex')) && cmd.includes('app-server');
      } catch {
        return false;
      }
    });
}

/** A trusted project with OpenComms installed for Codex, its member joined to "team", a peer
 *  leading it, and a Codex TUI launched by `opencomms codex` whose thread is bound (after Codex's
 *  hook review, answered in a plain Codex kept open, as codex-wake.test.ts does). */
async function wokenCodex(sb: Sandbox, defer: Defer) {
  const fake = defer(
    await startFakeResponses(Array.from({ length: 200 }, () => obeyPull('mcp__opencomms__opencomms_pull'))),
    (f) => f.close(),
  );
  const env = configureCodex(sb, fake);
  trustCodexProject(sb, env);
  defer(sb, () => {
    for (const p of daemons(sb)) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });
  const member = newPin();
  await opencomms(sb, 'install', 'codex');
  await opencomms(sb, 'install-member', '--host', 'codex', '--id', member);
  // The user's "Always allow" of opencomms_pull: under approval_policy = "never" Codex refuses a
  // tool call that is not approved in the config.
  appendFileSync(
    join(sb.proj, '.codex', 'config.toml'),
    '\n[mcp_servers.opencomms.tools.opencomms_pull]\napproval_mode = "approve"\n',
  );
  const peer = defer(await startPeer(sb, newPin(), 'team'), (p) => p.close());
  await leadTeam(peer);
  const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
  await joinTeam(rt, sb, member, 'codex', { role: 'Coder', role_prompt: 'You code.' });
  const launcherLog = join(sb.root, 'launcher.log');
  const termEnv = {
    ...env,
    TERM: 'xterm-256color',
    OPENCOMMS_CODEX_BIN: bin('codex'),
    OPENCOMMS_LAUNCHER_LOG: launcherLog,
  };
  const open = async (launcher: boolean, review = false): Promise<Terminal> => {
    const [cmd, args] = launcher ? [process.execPath, [OPENCOMMS, 'codex']] : [bin('codex'), []];
    const term = defer(
      await startTerminal(cmd, args, {
        cwd: sb.proj,
        env: termEnv,
        timeoutMs: 600_000,
        forward: [fake.port],
        cols: 120,
        rows: 40,
      }),
      (t) => t.close(),
    );
    if (review) await trustCodexHooks(term, env.CODEX_HOME!);
    await term.waitScreen(/Ask Codex/, 40_000);
    return term;
  };
  await open(false, true);
  await until("Codex's background server runs", () => daemons(sb).length > 0, 30_000);
  const term = await open(true);
  const info = () =>
    `launcher.log:\n${existsSync(launcherLog) ? readFileSync(launcherLog, 'utf8').slice(-3000) : ''}\nfake turns:\n${fake
      .turns()
      .map((r, i) => `#${i} ${r.endsWithToolResult ? 'tool' : 'input'} -> ${JSON.stringify(r.reply).slice(0, 100)}`)
      .join('\n')}\nscreen:\n${term.screen()}`;
  term.keys('-l', 'hello');
  await sleep(300);
  term.keys('Enter');
  await until(
    'the thread is bound',
    async () => (await rt.read()).channels.team!.members.find((m) => m.session_id === member)?.host_session_id,
    30_000,
    info,
  );
  await until('the first turn is over', () => !/esc to interrupt/.test(term.screen()), 30_000, info);
  await sleep(1500);
  /** Until nothing of the member is queued or in flight and the screen shows no running turn. */
  const settled = () =>
    until(
      'all mail handed over and the turn over',
      async () => {
        const state = await rt.read();
        const busy =
          (state.queues[member] ?? []).length > 0 ||
          Object.values(state.messages).some(
            (e: any) => e.recipient_session_id === member && e.delivery_status === 'in_flight',
          );
        if (busy || /esc to interrupt/.test(term.screen())) return false;
        await sleep(1000);
        return !/esc to interrupt/.test(term.screen());
      },
      60_000,
      info,
    ).catch(() => undefined);
  return { fake, peer, rt, member, settled };
}

async function check(r: { fake: { turns(): ModelRequest[] }; rt: any }, sent: Sent[]) {
  const st = await statuses(r.rt);
  // The TUI also makes tool-less requests (titles): the conversation is the scripted turns.
  const turns = r.fake.turns();
  console.log(`[limits-codex] ${summary(sent, turns)}`);
  return problems(sent, turns, (id) => st.get(id), { final: turns.at(-1), expectAllDelivered: true });
}

describe('Codex 0.171.0 TUI through `opencomms codex`: each message reaches the model whole', () => {
  it('six messages of 2,900 characters in one woken turn', async () => {
    const sb = sandbox('oc-limits-cx6');
    const r = await wokenCodex(sb, defer);
    const sent: Sent[] = [];
    for (let i = 1; i <= 6; i++) sent.push(await sendMessage(r.peer, 'team', `CX${i}`, makeMessage(`CX${i}`, 2900)));
    await r.settled();
    expect(await check(r, sent)).toEqual([]);
  }, 115_000);

  it('one message of 20,000 characters in a woken turn', async () => {
    const sb = sandbox('oc-limits-cx20k');
    const r = await wokenCodex(sb, defer);
    const sent = [await sendMessage(r.peer, 'team', 'CXT', makeMessage('CXT', 20_000))];
    await r.settled();
    expect(await check(r, sent)).toEqual([]);
  }, 115_000);
});
