// One agent on one machine of the network-namespace proof (machines.test.ts): a long-lived process
// that serves one push session over a PostgreSQL store reached through its namespace's own network
// stack. It reaches the server as every OpenComms process does, on loopback: a forwarder inside the
// namespace carries 127.0.0.1:<port> over the veth pair to the test's forwarder in the root
// namespace. Commands arrive on stdin, one JSON object a line; reports leave on stdout the same way.
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { Runtime } from '../../src/runtime/runtime.ts';
import { PgStore } from '../../src/store/postgres/store.ts';
import { forwardLoopback } from './net.ts';

const [gateway, gatewayPort, localPort, key, sid, role, worktree, received] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
];
const say = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

await forwardLoopback(Number(localPort), gateway, Number(gatewayPort));

/** Hand-overs wait here while `hold` is on: the host is still taking the prompt. */
let holding = false;
const held: Array<() => void> = [];

// The run's database (user, password, database) through the forwarder on this namespace's loopback.
const url = process.env.OPENCOMMS_AGENT_DATABASE_URL;
if (!url) throw new Error('OPENCOMMS_AGENT_DATABASE_URL is not set: net.ts passes it');
const store = new PgStore({ url, key });

/** Wall-clock ms (fractional), comparable between the processes of one host. */
const wall = () => performance.timeOrigin + performance.now();
// Every lease query as it is sent (a renewal, or a check of the others' leases): the test counts
// them, and a machine's last renewal is when its lease began to run out.
const leases = store.leases;
const renew = leases.renew.bind(leases);
const snapshot = leases.snapshot.bind(leases);
leases.renew = (...a) => {
  say({ lease_query: 'renew', at: wall() });
  return renew(...a);
};
leases.snapshot = () => {
  say({ lease_query: 'snapshot', at: wall() });
  return snapshot();
};
// With OPENCOMMS_AGENT_TRACE=1, the moments a delivery passes through (bench/machines.ts splits
// the latency by them): woken by the store's subscription, caught up (a look at the state answered), a
// mutation begun and committed.
if (process.env.OPENCOMMS_AGENT_TRACE === '1') {
  const subscribe = store.subscribe.bind(store);
  store.subscribe = (onChange, log) =>
    subscribe((change) => {
      say({ trace: 'woken', at: wall() });
      return onChange(change);
    }, log);
  const peek = store.peek.bind(store);
  store.peek = async () => {
    const r = await peek();
    say({ trace: 'looked', at: wall() });
    return r;
  };
  const mutate = store.mutate.bind(store);
  store.mutate = async (fn) => {
    say({ trace: 'mutate', at: wall() });
    const r = await mutate(fn);
    say({ trace: 'committed', at: wall() });
    return r;
  };
}

/** The sessions this computer's host has: its own, and those linked here by `join` with a `sid`.
 *  Like a real OpenCode server, which answers 404 for a session it does not have, the host refuses
 *  a prompt to any other session. */
const sessions = new Set([sid]);

const rt = new Runtime(store, {
  deliverOnChange: true,
  log: (line) => say({ log: line }),
  driver: {
    method: 'push',
    // As the OpenCode plugin: push sessions nobody serves may be prompted from here.
    crossServer: true,
    deliver: async (rid, _text, ids) => {
      if (!sessions.has(rid)) {
        say({ foreign: rid, ids, at: wall() });
        throw new Error(`prompt refused: 404 session ${rid} not found`);
      }
      // What the host was shown (before the commit): the test counts hand-overs from here.
      appendFileSync(received, `${ids.join('\n')}\n`);
      say({ shown: ids, at: wall() });
      if (holding) await new Promise<void>((r) => held.push(r));
    },
  },
});

const callerOf = (session: string, path: string) => ({
  session_id: session,
  host: 'host-push',
  surface: 'cli',
  delivery_mode: 'push',
  host_session_id: session,
  project_id: key,
  worktree: path,
});
const caller = callerOf(sid, worktree);

/** The floor of a store call from this machine: a round trip (`select 1`) and a committed insert
 *  into `table` that notifies, as every mutation does (a round trip, the server's flush to disk
 *  and its notification lock, which every notifying commit of the server takes in turn), each
 *  timed `n` times on a connection of its own, back to back; and, when `idle` is given, each timed
 *  `idle.n` times more after `idle.ms` of quiet, as the sampled sends meet them (a machine whose
 *  processes were idle takes longer to answer); the medians, ms. */
async function floor(table: string, n: number, idle: { ms: number; n: number } | null) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const median = async (q: (i: number) => Promise<unknown>, quiet = { ms: 0, n }) => {
    const ms: number[] = [];
    for (let i = 0; i < quiet.n; i++) {
      if (quiet.ms) await new Promise((r) => setTimeout(r, quiet.ms));
      const t = performance.now();
      await q(i);
      ms.push(performance.now() - t);
    }
    return ms.sort((x, y) => x - y)[Math.floor(quiet.n / 2)]!;
  };
  const roundTrip = () => c.query('select 1');
  const commit = (tag: string) => (i: number) =>
    c.query({ text: `insert into ${table} values ($1)`, values: [`${sid} ${tag} ${i}`] });
  try {
    const hot = { round_trip_ms: await median(roundTrip), commit_ms: await median(commit('hot')) };
    if (!idle) return hot;
    return {
      ...hot,
      idle_round_trip_ms: await median(roundTrip, idle),
      idle_commit_ms: await median(commit('idle'), idle),
    };
  } finally {
    await c.end();
  }
}

async function handle(cmd: { op: string; [k: string]: unknown }) {
  switch (cmd.op) {
    case 'start':
      await rt.start();
      return { started: rt.tag };
    case 'create':
      return rt.run({
        op: 'create',
        caller,
        args: { channel: cmd.channel, role, role_prompt: `Act as ${role}.`, rate_limit: 1000 },
      });
    case 'join': {
      // Another session of this computer's host (`sid`, `role`), from another checkout (`worktree`).
      const session = typeof cmd.sid === 'string' ? cmd.sid : sid;
      const as = typeof cmd.role === 'string' ? cmd.role : role;
      const r = await rt.run({
        op: 'join',
        caller: callerOf(session, typeof cmd.worktree === 'string' ? cmd.worktree : worktree),
        args: { channel: cmd.channel, role: as, role_prompt: `Act as ${as}.` },
      });
      if (r.ok) sessions.add(session);
      return r;
    }
    case 'serve': {
      const session = typeof cmd.sid === 'string' ? cmd.sid : sid;
      await rt.serve(session);
      return { served: session };
    }
    case 'reconcile': {
      // What the OpenCode plugin runs once its host serves again: the roster check, then a scan.
      const looked: string[] = [];
      await rt.deliveries.reconcile({
        hosts: new Set([caller.host]),
        worktree,
        label: 'host',
        lookup: async (id) => {
          looked.push(id);
          return sessions.has(id) ? 'alive' : 'gone';
        },
      });
      await rt.scan();
      return { looked };
    }
    case 'ping':
      return { pong: true };
    case 'send':
      return rt.run({ op: 'send', sid, args: { channel: cmd.channel, content: cmd.content, to: cmd.to } });
    case 'hold':
      holding = Boolean(cmd.on);
      return { holding };
    case 'floor':
      return floor(String(cmd.table), Number(cmd.n), (cmd.idle as { ms: number; n: number } | undefined) ?? null);
    case 'release':
      for (const r of held.splice(0)) r();
      return { released: true };
  }
  return { unknown: cmd.op };
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line) as { id: number; op: string };
  try {
    say({ id: cmd.id, answer: await handle(cmd) });
  } catch (e) {
    say({ id: cmd.id, error: (e as Error).message });
  }
}
