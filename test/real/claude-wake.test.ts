// Live wake of an idle, interactive Claude Code 2.1.332 (in tmux, not -p) with OpenComms installed by
// the real CLI. The session sits at its prompt; a peer sends through MCP; with no keystroke the
// fake Anthropic server receives a request holding the framed message, and the model's reply (a
// tool call on the session's own OpenComms MCP server) reaches the peer. Twice, again after
// /clear, each message exactly once; a SIGKILLed `claude` leaves no waiter behind and no mail taken.
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { alive, frameIds, hookProcesses, newestUserText, until, wakeRig } from './claude-harness.ts';

const { defer, sandbox } = useCleanups();

describe('Claude Code 2.1.332, interactive: an idle session is woken with its mail', () => {
  it('wakes twice and again after /clear, the replies reach the peer, each message once; a killed claude leaves no waiter', async () => {
    const sb = sandbox('oc-wake');
    const { fake, peer, rt, term, row, info, joined, armed, wake } = await wakeRig(sb, defer);

    await armed('after the join turn');
    const w1 = await wake('wake-1');
    await armed('after the first woken turn');
    const w2 = await wake('wake-2');
    await armed('after the second woken turn');
    term.type('/clear');
    const cleared = await until(
      'the member is bound to the session /clear started',
      async () => {
        const r = await row();
        return r && r.host_session_id !== joined && !r.stale && r.host_session_id;
      },
      20_000,
      info,
    );
    expect(cleared).not.toBe(joined);
    await armed('after /clear');
    const w3 = await wake('wake-3');
    console.log(`[wake] send → model request: ${[w1, w2, w3].map((w) => `${w.ms} ms`).join(', ')}`);

    // Exactly once: every message delivered on its first hand-over, shown to the model in one turn.
    // (The woken turn commits detached from its hook: the last commit may trail the reply a little.)
    for (const { id } of [w1, w2, w3]) {
      const e = await until(
        `${id} committed`,
        async () => {
          const state = await rt.read();
          return state.messages[id]
            ? false
            : (await rt.store.history(state.channels.team!.id, 100)).find((x) => x.message_id === id);
        },
        10_000,
        info,
      );
      expect(e, id).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push', attempts: 1 });
      expect(
        fake.turns().filter((r) => frameIds(newestUserText(r)).includes(id)),
        id,
      ).toHaveLength(1);
    }
    expect(peer.received.filter((t) => /ack ocm_/.test(t))).toHaveLength(3);

    // SIGKILL of claude: the waiter notices on its own; mail sent afterwards is not taken.
    const { claude, waiter } = await armed('after the third woken turn');
    process.kill(claude, 'SIGKILL');
    await until('the waiter is gone after claude was killed', () => !alive(waiter), 5000, info);
    await until(
      'no hook process of this project remains',
      () => hookProcesses(sb).length === 0,
      5000,
      () => JSON.stringify(hookProcesses(sb)),
    );
    const { id: orphan } = await peer.send('after the kill');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await rt.read()).messages[orphan]).toMatchObject({ delivery_status: 'pending', attempts: 0 });
  }, 180_000);
});
