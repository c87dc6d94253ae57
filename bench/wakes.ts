// What the wake guard costs (protocol.md "Wakes"): the guard's own work (a send's wake chain; a
// wake's decision and ledger) timed on the engine's state, beside a send and a wake of the same run
// through a runtime on a file store (send returns; the owner's driver is handed the batch). Its
// share of each is a ratio of medians measured together; its share of the bare engine's send and
// drain is printed too. Agents answer after 70 s on a virtual clock (no loop; the default budgets
// stay unspent), so every wake takes the guard's full path: chain, budgets, ledger.
import { apply, type Command, type Env } from '../src/engine/index.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { FileStore } from '../src/store/index.ts';
import { count, decideWake, replyChain } from '../src/engine/wakes.ts';
import { emptyState, type State } from '../src/protocol/schema.ts';
import { caller, emit, emitRatio, stats, withProject } from './lib.ts';

const ROUNDS = 3_000;
const WARM = 500;
const THINK_MS = 70_000;

/** A send through a runtime on a file store, and its wake: the send's return and the moment the
 *  recipient's driver is handed the batch (the runtime drains on the send's own Wake effect). */
async function runtimeWakes(): Promise<{ send: ReturnType<typeof stats>; wake: ReturnType<typeof stats> }> {
  return withProject(async (dir) => {
    let clock = 1_700_000_000_000;
    let handed: (at: number) => void = () => {};
    const rt = new Runtime(new FileStore(dir), {
      now: () => clock,
      log: () => {},
      driver: { method: 'push', owns: () => true, deliver: async () => handed(performance.now()) },
    });
    await rt.start();
    await rt.run({
      op: 'create',
      caller: caller(dir, 'a', 'push'),
      args: { channel: 'w', role: 'A', role_prompt: 'w' },
    });
    await rt.run({ op: 'join', caller: caller(dir, 'b', 'push'), args: { channel: 'w', role: 'B', role_prompt: 'w' } });
    const send: number[] = [];
    const wake: number[] = [];
    let [from, to] = ['a', 'b'];
    for (let i = 0; i < 1_000 + WARM; i++) {
      clock += THINK_MS;
      const got = new Promise<number>((res) => (handed = res));
      const t = performance.now();
      const r = await rt.run({ op: 'send', sid: from, args: { channel: 'w', content: `finding ${i}`, to } });
      const sent = performance.now();
      if (!r.ok) throw new Error(`send: ${r.message}`);
      const at = await got;
      if (i >= WARM) {
        send.push(sent - t);
        wake.push(at - t);
      }
      [from, to] = [to, from];
    }
    await rt.close();
    return { send: stats(send), wake: stats(wake) };
  });
}

export async function wakesBench() {
  let state: State = emptyState();
  let now = 1_700_000_000_000;
  let ids = 0;
  const env = (): Env => ({
    now,
    by: 'bench@host',
    mint: (p) => `${p}_${(++ids).toString(16).padStart(32, '0')}`,
    spawnHosts: [],
  });
  const run = (cmd: Command) => {
    const o = apply(state, cmd, env());
    if (!o.result.ok) throw new Error(`${cmd.op}: ${o.result.message}`);
    state = o.state;
    return o;
  };
  run({ op: 'create', caller: caller('/bench', 'a', 'push'), args: { channel: 'w', role: 'A', role_prompt: 'work' } });
  run({ op: 'join', caller: caller('/bench', 'b', 'push'), args: { channel: 'w', role: 'B', role_prompt: 'work' } });
  const timed = { send: [] as number[], drain: [] as number[], chain: [] as number[], wake: [] as number[] };
  let [from, to] = ['a', 'b'];
  for (let i = 0; i < ROUNDS + WARM; i++) {
    const keep = i >= WARM;
    const ch = state.channels.w!;
    let t = performance.now();
    replyChain(ch, from, now);
    if (keep) timed.chain.push(performance.now() - t);
    t = performance.now();
    run({ op: 'send', sid: from, args: { channel: 'w', content: `finding ${i}: the parser drops CRLF at line ${i}` } });
    if (keep) timed.send.push(performance.now() - t);
    now += 1_100;
    // The guard's work on a copy of this state: what the drain below does before it hands over.
    const copy = structuredClone(state);
    t = performance.now();
    decideWake(copy, copy.channels.w!, to, 'bench/push', now);
    count(copy.channels.w!, to, now, { messages: 1, size: 300 });
    if (keep) timed.wake.push(performance.now() - t);
    t = performance.now();
    const d = run({ op: 'drain', rid: to });
    if (keep) timed.drain.push(performance.now() - t);
    const p = d.effects.find((e) => e.type === 'Prompt');
    if (p?.type !== 'Prompt') throw new Error(`round ${i}: the drain held the wake`);
    run({
      op: 'commit',
      rid: to,
      message_ids: p.message_ids,
      method: 'push',
      held: { by: 'bench@host', attempts: p.attempts },
    });
    now += THINK_MS;
    [from, to] = [to, from];
  }
  const s = { send: stats(timed.send), drain: stats(timed.drain), chain: stats(timed.chain), wake: stats(timed.wake) };
  const rt = await runtimeWakes();
  emit('wake_guard', {
    unit: 'ms',
    send_chain: s.chain,
    wake_decision: s.wake,
    runtime_send: rt.send,
    runtime_wake: rt.wake,
  });
  emitRatio('wake_guard_share_of_send_p50', s.chain.p50, rt.send.p50, '<= 0.05', {
    note: "a send's wake chain over a send through a runtime on a file store",
  });
  emitRatio('wake_guard_share_of_wake_p50', s.wake.p50, rt.wake.p50, '<= 0.05', {
    note: "a wake's decision and ledger over send → batch handed to the owner's driver, same runtime",
  });
  emitRatio('wake_guard_share_of_engine_drain_p50', s.wake.p50, s.drain.p50, 'reported', {
    note: 'over the bare engine drain that runs it (no store, no process): the smallest denominator',
  });
}
