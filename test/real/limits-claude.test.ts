// Hosts that cut what they show: Claude Code 2.1.332 (real binary, offline): mail larger
// than a route shows whole must still reach the model whole. Measured limits (docs/hosts.md "What
// each route shows whole"): a hook's additionalContext 10,000 UTF-16 characters (beyond: moved to a
// file, a 2 KB preview shown); an MCP tool result 50,000 (beyond: moved to a file); a wake 100,867
// characters of stderr with OpenComms' rewakeMessage (beyond: the middle is cut, saved nowhere).
// Each message carries unique tokens at its start, middle and end; "shown" is what the requests the
// fake model server received hold. The fake model obeys OpenComms' own "… waiting … call
// opencomms_pull" line. Checked per scenario (limits-harness.ts `problems`): every message
// reconstructed whole from the frames the model saw (alone, or consecutive `part: N of K`), no frame
// it saw cut, delivered only what it saw whole, nothing lost, nothing shown twice, FIFO.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { acknowledge, joinTeam, leadTeam, opencomms, startPeer, until, wakeRig } from './claude-harness.ts';
import { useCleanups } from './cleanups.ts';
import { bin, configureClaude, jsonLines, namespaced, tail, trustClaudeProject, type Sandbox } from './env.ts';
import { startFakeAnthropic } from './fake/index.ts';
import { makeMessage, obeyPull, problems, sendMessage, statuses, summary, type Sent } from './limits-harness.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;
const PULL = 'mcp__opencomms__opencomms_pull';

/** `claude -p` reading its prompts as stream-json from stdin: one process, one session, several
 *  turns (SessionStart once, then UserPromptSubmit and Stop per turn), with OpenComms installed and
 *  its member joined, and a peer to send from. */
async function streamRig(sb: Sandbox) {
  const fake = defer(await startFakeAnthropic(Array.from({ length: 200 }, () => obeyPull(PULL))), (f) => f.close());
  const member = pin();
  await opencomms(sb, 'install', 'claude-code');
  await opencomms(sb, 'install-member', '--id', member);
  const env = configureClaude(sb, fake);
  trustClaudeProject(sb, env, ['opencomms']);
  const peer = defer(await startPeer(sb, pin(), 'team'), (p) => p.close());
  await leadTeam(peer);
  const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
  await joinTeam(rt, sb, member, 'claude-code', { role: 'Builder', role_prompt: 'You build.' });
  const args = ['-p', '--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose'];
  args.push('--model', 'claude-sonnet-4-5', '--max-turns', '60', '--allowedTools', 'mcp__opencomms');
  const ns = defer(await namespaced(bin('claude'), args, { forward: [fake.port] }), (n) => n.close());
  const child = spawn(ns.argv[0]!, ns.argv.slice(1), {
    cwd: sb.proj,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  defer(child, (c) => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (err += d));
  const results = () => jsonLines(out).filter((l) => l.type === 'result').length;
  const pending = async () => {
    const state = await rt.read();
    return (state.queues[member] ?? []).length;
  };
  const info = () =>
    `stderr: ${tail(err, 1500)}\nfake turns:\n${fake
      .turns()
      .map((r, i) => `#${i} ${r.endsWithToolResult ? 'tool' : 'user'} -> ${JSON.stringify(r.reply).slice(0, 120)}`)
      .join('\n')}`;
  return {
    fake,
    peer,
    rt,
    member,
    info,
    /** One prompt; resolves when its turn (Stop hook included) has ended. */
    async turn(text: string) {
      const n = results();
      child.stdin.write(`${JSON.stringify({ type: 'user', message: { role: 'user', content: text } })}\n`);
      await until(`the turn "${text}" ends`, () => results() > n, 60_000, info);
    },
    /** More turns while mail is still queued for the member (the model reads at boundaries). */
    async drain(max = 4) {
      for (let i = 0; i < max && (await pending()) > 0; i++) await this.turn(`continue ${i + 1}`);
    },
  };
}

async function check(r: { fake: { turns(): any[] }; rt: any }, sent: Sent[]) {
  const st = await statuses(r.rt);
  const turns = r.fake.turns();
  console.log(`[limits-claude] ${summary(sent, turns)}`);
  return problems(sent, turns, (id) => st.get(id), { final: turns.at(-1), expectAllDelivered: true });
}

describe('Claude Code 2.1.332: each message reaches the model whole, whatever its size and route', () => {
  it('six messages of 2,900 characters queued at SessionStart', async () => {
    const sb = sandbox('oc-limits-ss6');
    const r = await streamRig(sb);
    const sent: Sent[] = [];
    for (let i = 1; i <= 6; i++) sent.push(await sendMessage(r.peer, 'team', `SS${i}`, makeMessage(`SS${i}`, 2900)));
    await r.turn('hello');
    await r.drain();
    expect(await check(r, sent)).toEqual([]);
  }, 110_000);

  it('six messages of 2,900 characters handed over at a prompt (UserPromptSubmit)', async () => {
    const sb = sandbox('oc-limits-ups6');
    const r = await streamRig(sb);
    await r.turn('hello');
    const sent: Sent[] = [];
    for (let i = 1; i <= 6; i++) sent.push(await sendMessage(r.peer, 'team', `UP${i}`, makeMessage(`UP${i}`, 2900)));
    await r.turn('next');
    await r.drain();
    expect(await check(r, sent)).toEqual([]);
  }, 110_000);

  it('one message of 20,000 characters queued at SessionStart', async () => {
    const sb = sandbox('oc-limits-20k');
    const r = await streamRig(sb);
    const sent = [await sendMessage(r.peer, 'team', 'TW1', makeMessage('TW1', 20_000))];
    await r.turn('hello');
    await r.drain();
    expect(await check(r, sent)).toEqual([]);
  }, 110_000);

  it('one message of 100,000 characters at a prompt, through the hooks and opencomms_pull', async () => {
    const sb = sandbox('oc-limits-100k');
    const r = await streamRig(sb);
    await r.turn('hello');
    const sent = [await sendMessage(r.peer, 'team', 'HK1', makeMessage('HK1', 100_000))];
    await r.turn('next');
    await r.drain();
    expect(await check(r, sent)).toEqual([]);
  }, 110_000);

  it('three messages of 50,000 characters to an idle interactive session (the wake)', async () => {
    const sb = sandbox('oc-limits-wake');
    const ack = acknowledge('team', { role: 'Builder', role_prompt: 'You build.' });
    const { fake, peer, rt, armed, info, member } = await wakeRig(sb, defer, 120, () =>
      obeyPull(PULL, (req) => {
        const a = ack(req);
        return a.includes('opencomms_join') ? a : undefined;
      }),
    );
    await armed('after the join turn');
    const sent: Sent[] = [];
    for (let i = 1; i <= 3; i++) sent.push(await sendMessage(peer, 'team', `WK${i}`, makeMessage(`WK${i}`, 50_000)));
    // Woken turns until nothing is queued or in flight for the member, then the last commit.
    await until(
      'no mail of the member queued or in flight',
      async () => {
        const state = await rt.read();
        return (
          !(state.queues[member] ?? []).length &&
          !Object.values(state.messages).some(
            (e: any) => e.recipient_session_id === member && e.delivery_status === 'in_flight',
          )
        );
      },
      60_000,
      info,
    ).catch(() => undefined);
    await new Promise((res) => setTimeout(res, 3000));
    expect(await check({ fake, rt }, sent)).toEqual([]);
  }, 115_000);
});
