// Hosts that cut what they show: OpenCode 1.18.33 (real `opencode serve`, offline): mail
// larger than a route shows whole must still reach the model whole. Measured (docs/hosts.md "What
// each route shows whole"): a pushed turn (a new user message, as the plugin's SDK prompt) showed
// 1,000,000 characters whole; a tool's result (plugin or MCP) is shown whole up to 2,000 lines and
// 51,200 UTF-8 bytes — beyond, OpenCode keeps the first lines within that (one JSON line over it:
// nothing) and saves the whole under $XDG_DATA_HOME/opencode/tool-output/. Each message carries
// unique tokens at its start, middle and end; "shown" is what the requests the fake model server
// received hold. Checked (limits-harness.ts `problems`): every message reconstructed whole from the
// frames the model saw, no frame it saw cut, delivered only what it saw whole, nothing lost,
// nothing shown twice, FIFO.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { OPENCOMMS, joinTeam, leadTeam, startPeer, until } from './claude-harness.ts';
import { useCleanups } from './cleanups.ts';
import { configureOpenCode } from './env.ts';
import { lastPrompt, startFakeOpenAIChat, type ModelRequest } from './fake/index.ts';
import { makeMessage, obeyPull, problems, sendMessage, statuses, summary, type Sent } from './limits-harness.ts';
import { setupProject, startServe, textOf } from './opencode-harness.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;

async function check(turns: ModelRequest[], rt: any, sent: Sent[]) {
  const st = await statuses(rt);
  console.log(`[limits-opencode] ${summary(sent, turns)}`);
  return problems(sent, turns, (id) => st.get(id), { final: turns.at(-1), expectAllDelivered: true });
}

/** Until every envelope of `sent` is delivered (or `ms` passed). */
const allDelivered = (rt: any, sent: Sent[], ms: number) =>
  until(
    'every envelope delivered',
    async () => {
      const st = await statuses(rt);
      return sent.every((s) => s.ids.every((id) => st.get(id) === 'delivered'));
    },
    ms,
  ).catch(() => undefined);

describe('OpenCode 1.18.33: each message reaches the model whole', () => {
  it('the plugin pushes a message of 100,000 characters to an idle session, whole', async () => {
    const sb = sandbox('oc-limits-ocpush');
    const JOIN = `CALL opencomms_join ${JSON.stringify({ channel: 'team', role: 'Reviewer', role_prompt: 'You review.' })}`;
    const fake = defer(
      await startFakeOpenAIChat({
        'CONV-B': [JOIN, 'SAY joined', ...Array.from({ length: 60 }, () => obeyPull('opencomms_pull'))],
      }),
      (f) => f.close(),
    );
    const env = setupProject(sb, fake);
    const peer = defer(await startPeer(sb, pin(), 'team'), (p) => p.close());
    await leadTeam(peer);
    const s = defer(await startServe(sb, env, [fake]), (x) => x.stop());
    const B = (await s.api.createSession('reviewer')).id;
    expect(textOf(await s.api.prompt(B, 'CONV-B join the team channel'))).toBe('joined');
    const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
    const sent = [await sendMessage(peer, 'team', 'OP1', makeMessage('OP1', 100_000))];
    await allDelivered(rt, sent, 60_000);
    await s.api.idle(B, 30_000).catch(() => undefined);
    const turns = fake.turns().filter((r) => r.conversation === 'CONV-B');
    expect(await check(turns, rt, sent)).toEqual([]);
  }, 110_000);

  it('a session reading its mail with opencomms_pull (OpenComms as its MCP server): three messages of 30,000 characters', async () => {
    const sb = sandbox('oc-limits-ocpull');
    const PULL = 'opencomms_opencomms_pull';
    const fake = defer(
      await startFakeOpenAIChat({
        'CONV-P': Array.from({ length: 60 }, () =>
          obeyPull(PULL, (req) => (/read your OpenComms mail/.test(lastPrompt(req)) ? `CALL ${PULL} {}` : undefined)),
        ),
      }),
      (f) => f.close(),
    );
    const member = pin();
    const env = configureOpenCode(sb, fake, {
      opencomms: {
        command: process.execPath,
        args: [OPENCOMMS, 'mcp', '--project', sb.proj],
        env: { OPENCOMMS_MEMBER_ID: member },
      },
    });
    const peer = defer(await startPeer(sb, pin(), 'team'), (p) => p.close());
    await leadTeam(peer);
    const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
    await joinTeam(rt, sb, member, 'mcp', { role: 'Reviewer', role_prompt: 'You review.' });
    const sent: Sent[] = [];
    for (let i = 1; i <= 3; i++) sent.push(await sendMessage(peer, 'team', `PL${i}`, makeMessage(`PL${i}`, 30_000)));
    const s = defer(await startServe(sb, env, [fake]), (x) => x.stop());
    const P = (await s.api.createSession('puller')).id;
    await s.api.prompt(P, 'CONV-P read your OpenComms mail', 90_000);
    const turns = fake.turns().filter((r) => r.conversation === 'CONV-P');
    expect(
      turns.some((r) => r.endsWithToolResult),
      'the model pulled',
    ).toBe(true);
    expect(await check(turns, rt, sent)).toEqual([]);
  }, 110_000);
});
