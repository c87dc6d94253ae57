// The order and the count of OpenComms frames as the model reads them in an idle, interactive
// Claude Code 2.1.332 (tmux, not -p) with the hooks OpenComms installs: what is asserted is the
// request the fake Anthropic server receives (every user text of the conversation), not the
// store's records. A burst of ten to an idle session; two messages during a busy turn.
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { framesRead, frameIds, newestUserText, until, wakeRig } from './claude-harness.ts';
import type { ModelRequest } from './fake/index.ts';

const { defer, sandbox } = useCleanups();

/** The conversation once every id has reached the model and the session has gone quiet: the
 *  newest request, which carries every user text before it. */
async function conversation(rig: Awaited<ReturnType<typeof wakeRig>>, ids: string[]): Promise<ModelRequest> {
  await until(
    'every message reached the model',
    () => {
      const last = rig.fake.turns().at(-1);
      return last && ids.every((id) => framesRead(last).includes(id));
    },
    40_000,
    rig.info,
  );
  await rig.armed('after the last turn');
  return rig.fake.turns().at(-1)!;
}

describe('Claude Code 2.1.332, interactive: mail is read oldest first and once', () => {
  it('a burst of ten to an idle session: read in the order sent, each frame once', async () => {
    const rig = await wakeRig(sandbox('oc-order-burst'), defer);
    await rig.armed('after the join turn');
    // The waiter wakes the session with what it finds: U01 alone once it is in flight, so the rest
    // of the burst comes through the woken turn's hooks or a later wake, the route that reordered.
    const ids = [(await rig.peer.send('U01')).id];
    await until(
      'the waiter took U01',
      async () => (await rig.rt.read()).messages[ids[0]!]?.delivery_status === 'in_flight',
      10_000,
      rig.info,
    );
    for (let i = 2; i <= 10; i++) ids.push((await rig.peer.send(`U${String(i).padStart(2, '0')}`)).id);
    const req = await conversation(rig, ids);
    expect(framesRead(req), rig.info()).toEqual(ids);
    const turns = rig.fake.turns().filter((r) => frameIds(newestUserText(r)).length).length;
    console.log(`[order] burst of 10: read in order over ${turns} request(s) carrying mail`);
    // Each handed over once (the woken turn commits detached from its hook: it may trail the reply).
    for (const id of ids) {
      const logged = await until(
        `${id} committed`,
        async () => {
          const state = await rig.rt.read();
          return state.messages[id]
            ? false
            : (await rig.rt.store.history(state.channels.team!.id, 100)).find((e) => e.message_id === id);
        },
        10_000,
        rig.info,
      );
      expect(logged, id).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push', attempts: 1 });
    }
  }, 180_000);

  it('a busy turn with two messages sent during it: read in order, each once', async () => {
    // `[busy]` makes the fake model think for 5 s: the session is busy while m1 and m2 arrive.
    const rig = await wakeRig(
      sandbox('oc-order-busy'),
      defer,
      60,
      (ack) => (req) =>
        newestUserText(req).includes('[busy]') && !req.endsWithToolResult ? 'DELAY 5000 SAY worked' : ack(req),
    );
    await rig.armed('after the join turn');
    rig.term.type('[busy] work for a while');
    await until(
      'the busy turn reached the model',
      () => rig.fake.turns().some((r) => newestUserText(r).includes('[busy]')),
      20_000,
      rig.info,
    );
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, 1000));
    const m1 = (await rig.peer.send('m1 during the turn')).id;
    await new Promise((r) => setTimeout(r, Math.max(0, t0 + 3000 - Date.now())));
    const m2 = (await rig.peer.send('m2 during the turn')).id;
    const req = await conversation(rig, [m1, m2]);
    expect(framesRead(req), rig.info()).toEqual([m1, m2]);
  }, 180_000);
});
