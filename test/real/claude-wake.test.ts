// Live wake of an idle, interactive Claude Code 2.1.332 (in tmux, not -p) with OpenComms installed by
// the real CLI. The session sits at its prompt; a peer sends through MCP; with no keystroke the
// fake Anthropic server receives a request holding the framed message, and the model's reply (a
// tool call on the session's own OpenComms MCP server) reaches the peer. Twice, again after
// /clear, each message exactly once; a SIGKILLed `claude` leaves no waiter behind and no mail taken.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { bin, configureClaude, trustClaudeProject } from './env.ts';
import { startFakeAnthropic } from './fake/index.ts';
import { startTerminal } from './tmux.ts';
import { acknowledge, alive, frameIds, hookProcesses, newestUserText, opencomms, startPeer, until, waiters } from './claude-harness.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;

describe('Claude Code 2.1.332, interactive: an idle session is woken with its mail', () => {
  it('wakes twice and again after /clear, the replies reach the peer, each message once; a killed claude leaves no waiter', async () => {
    const sb = sandbox('oc-wake');
    const fake = defer(await startFakeAnthropic(Array.from({ length: 40 }, () => acknowledge('team', { role: 'Builder', role_prompt: 'You build and acknowledge every message.' }))), (f) => f.close());
    const CLAUDE = pin(), PEER = pin();
    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install-member', '--id', CLAUDE);
    const env = { ...configureClaude(sb, fake), OPENCOMMS_HOOK_LOG: join(sb.root, 'hooks.log') };
    trustClaudeProject(sb, env, ['opencomms']);
    const peer = defer(await startPeer(sb, PEER, 'team'), (p) => p.close());
    expect((await peer.call('opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'You lead.' })).ok).toBe(true);
    const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
    const row = async () => (await rt.read()).channels.team?.members.find((m) => m.session_id === CLAUDE);
    let mail = '';
    const info = () => `mail: ${mail}\nhooks.log:\n${existsSync(join(sb.root, 'hooks.log')) ? readFileSync(join(sb.root, 'hooks.log'), 'utf8') : ''}\nfake turns:\n${fake.turns().map((r) => `${r.at} ${JSON.stringify(newestUserText(r).slice(-160))} -> ${JSON.stringify(r.reply)}`).join('\n')}\nwaiters ${JSON.stringify(waiters(sb))}\nscreen:\n${term.screen()}`;

    const term = defer(await startTerminal(bin('claude'), ['--model', 'claude-sonnet-4-5'], { cwd: sb.proj, env, timeoutMs: 240_000, forward: [fake.port] }), (t) => t.close());
    await term.waitScreen(/❯/, 40_000);
    // The one keystroke of the test: the session joins the channel through its own MCP server.
    term.type('[join] join the team channel');
    const joined = await until('Claude joined and its session bound', async () => (await row())?.host_session_id ?? false, 30_000, info);
    let lastWaiter = 0;
    const armed = (what: string) => until(`a new waiter is armed (${what})`, () => {
      const w = waiters(sb).find((x) => x.waiter !== lastWaiter && alive(x.waiter));
      if (w) lastWaiter = w.waiter;
      return w;
    }, 20_000, info);

    const wake = async (label: string) => {
      const { id, at } = await peer.send(`${label}: please acknowledge`);
      const req = await until(`the fake model receives ${label} with no keystroke`, async () => {
        mail = JSON.stringify(Object.values((await rt.read()).messages).map((e) => [e.message_id.slice(0, 12), e.delivery_status, e.in_flight_by]));
        return fake.turns().find((r) => frameIds(newestUserText(r)).includes(id));
      }, 15_000, info);
      expect(newestUserText(req)).toContain(`<<<UNTRUSTED_PEER_MESSAGE>>>\n${label}: please acknowledge\n<<<END_UNTRUSTED_PEER_MESSAGE>>>`);
      expect(newestUserText(req)).toContain('OpenComms delivered new mail from your channel peers:');
      await peer.pullUntil(new RegExp(`ack ${id}`), 15_000);
      return { id, ms: req.at - at };
    };

    await armed('after the join turn');
    const w1 = await wake('wake-1');
    await armed('after the first woken turn');
    const w2 = await wake('wake-2');
    await armed('after the second woken turn');
    term.type('/clear');
    const cleared = await until('the member is bound to the session /clear started', async () => {
      const r = await row();
      return r && r.host_session_id !== joined && !r.stale && r.host_session_id;
    }, 20_000, info);
    expect(cleared).not.toBe(joined);
    await armed('after /clear');
    const w3 = await wake('wake-3');
    console.log(`[wake] send → model request: ${[w1, w2, w3].map((w) => `${w.ms} ms`).join(', ')}`);

    // Exactly once: every message delivered on its first hand-over, shown to the model in one turn.
    const state = await rt.read();
    const logged = await rt.store.history(state.channels.team!.id, 100);
    for (const { id } of [w1, w2, w3]) {
      expect(logged.find((e) => e.message_id === id), id).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push', attempts: 1 });
      expect(fake.turns().filter((r) => frameIds(newestUserText(r)).includes(id)), id).toHaveLength(1);
    }
    expect(peer.received.filter((t) => /ack ocm_/.test(t))).toHaveLength(3);

    // SIGKILL of claude: the waiter notices on its own; mail sent afterwards is not taken.
    const { claude, waiter } = await armed('after the third woken turn');
    process.kill(claude, 'SIGKILL');
    await until('the waiter is gone after claude was killed', () => !alive(waiter), 5000, info);
    await until('no hook process of this project remains', () => hookProcesses(sb).length === 0, 5000, () => JSON.stringify(hookProcesses(sb)));
    const { id: orphan } = await peer.send('after the kill');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await rt.read()).messages[orphan]).toMatchObject({ delivery_status: 'pending', attempts: 0 });
  }, 180_000);
});
