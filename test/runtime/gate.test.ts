// An adapter's gate (FEATURES.md §3.2 "ADP", §7.2) on a call that changes state is checked under
// the lock, on the state the call changes; the call's effects are routed by the state it left,
// with no read of their own.
import { expect, it } from 'vitest';
import type { Caller } from '../../src/engine/index.ts';
import { refuse } from '../../src/protocol/result.ts';
import type { State } from '../../src/protocol/schema.ts';
import { rosterGate } from '../../src/runtime/gates.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { MemoryStore } from '../../src/store/index.ts';

const caller = (session_id: string): Caller => ({
  session_id,
  host: 'test',
  surface: 'mcp',
  delivery_mode: 'pull',
  host_session_id: null,
  project_id: 'local-project',
  worktree: '/w',
});
const notMember = () => refuse('identity_not_member', 'not on a roster');
const gateFor = (sid: string, channel: string) => (state: Readonly<State>) =>
  rosterGate(state, sid, channel, notMember);

/** A memory store that counts lock-free reads and can answer them with an old state (what a
 *  process sees before it catches up with another's write). */
class Counted extends MemoryStore {
  peeks = 0;
  stale: Readonly<State> | null = null;
  override async peek(): Promise<Readonly<State>> {
    this.peeks++;
    return this.stale ?? super.peek();
  }
}

async function channelOfTwo() {
  const store = new Counted();
  const rt = new Runtime(store, { log: () => {} });
  expect(
    (await rt.run({ op: 'create', caller: caller('a'), args: { channel: 'c', role: 'A', role_prompt: 'send' } })).ok,
  ).toBe(true);
  expect(
    (await rt.run({ op: 'join', caller: caller('b'), args: { channel: 'c', role: 'B', role_prompt: 'read' } })).ok,
  ).toBe(true);
  return { store, rt };
}

it('§7.2 a sender who left after the last look is refused by the gate under the lock, not by the engine', async () => {
  const { store, rt } = await channelOfTwo();
  store.stale = await store.read(); // still shows `a` on the roster
  expect((await rt.run({ op: 'disconnect', sid: 'a', args: { channel: 'c' } })).ok).toBe(true);
  const r = await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'hi' } }, gateFor('a', 'c'));
  expect(r).toMatchObject({ ok: false, data: { reason: 'identity_not_member' } });
});

it('a gated send reads the state only under its lock: no look before it, none to route its wake', async () => {
  const notified: string[] = [];
  const store = new Counted();
  const rt = new Runtime(store, {
    log: () => {},
    // An active driver that owns nobody: every Wake effect is routed (and read for) in notify.
    driver: {
      method: 'push',
      owns: (rid) => {
        notified.push(rid);
        return false;
      },
      deliver: async () => {},
    },
  });
  await rt.run({ op: 'create', caller: caller('a'), args: { channel: 'c', role: 'A', role_prompt: 'send' } });
  await rt.run({ op: 'join', caller: caller('b'), args: { channel: 'c', role: 'B', role_prompt: 'read' } });
  await rt.settled();
  store.peeks = 0;
  const r = await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'hi' } }, gateFor('a', 'c'));
  await rt.settled();
  expect(r.ok).toBe(true);
  expect(notified).toContain('b');
  expect(store.peeks).toBe(0);
});

it('a refused caller of a call that reads history first is refused before that read', async () => {
  const { store, rt } = await channelOfTwo();
  let historyReads = 0;
  const history = store.history.bind(store);
  store.history = (id, limit) => {
    historyReads++;
    return history(id, limit);
  };
  const r = await rt.run({ op: 'history', sid: 'x', args: { channel: 'c' } }, gateFor('x', 'c'));
  expect(r).toMatchObject({ ok: false, data: { reason: 'identity_not_member' } });
  const s = await rt.run(
    { op: 'save_session', actor: { sid: 'x', project_id: 'local-project', worktree: '/w' }, args: { channel: 'c' } },
    gateFor('x', 'c'),
  );
  expect(s).toMatchObject({ ok: false, data: { reason: 'identity_not_member' } });
  expect(historyReads).toBe(0);
});
