// Several computers (computers.md): two computers as Linux network namespaces (test/netns/net.ts), one
// agent process each with the default lease, sharing one PostgreSQL. Four figures beside their
// targets: a send on A until B's host is shown the batch (split by where the time goes), the same
// send until Claude Code's waiter on B (the installed hook runner's `wait`) has written the batch
// and exited 2, the lease queries per process per minute, and a dead computer's in-flight mail back
// to pending after its last renewal. Namespaces need root: otherwise one line says the figures were
// not measured, and why.
//   sudo npm run bench -- machines   (OPENCOMMS_TEST_DATABASE_URL picks the server)
import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { WAIT_CMD } from '../adapters/claude-code/install.ts';
import { install } from '../src/cli/hosts.ts';
import type { State } from '../src/protocol/schema.ts';
import { LEASE_MS } from '../src/runtime/limits.ts';
import { processTag } from '../src/runtime/process.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { writeBinding } from '../src/store/binding.ts';
import { PgStore } from '../src/store/postgres/store.ts';
import { Machine, insideUrl, type Agent } from '../test/netns/net.ts';
import { admin, newProjectKey } from '../test/helpers/postgres.ts';
import { emit, round, stats } from './lib.ts';

const url = process.env.OPENCOMMS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/** Timed sends A → B, each past the recipient's delivery cooldown (1 s) so it is handed over at once. */
const SAMPLES = 30;
const SPACING_MS = 1_100;
const WARM = 3;
/** Queries per floor figure: back to back, and each after SPACING_MS of quiet as a sample's are. */
const FLOOR_N = 21;
const FLOOR_IDLE_N = 7;
/** Namespace numbers of their own: `npm run test:machines` takes 1 and 2, the soak from 11 up. */
const NS = [21, 22] as const;
const CHANNEL = 'bench';

const wall = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const FIGURES = [
  'send on computer A → batch in flight and shown at the owner on computer B (namespaces, NOTIFY)',
  "send on computer A → Claude Code's waiter on computer B wrote the batch and exited 2 (the installed hook runner)",
  'lease renewals: queries per process per minute',
  "a dead computer's in-flight mail back to pending after its last renewal",
];

/** Why the figures cannot be measured here, or null. */
async function unmeasurable(): Promise<string | null> {
  if (process.getuid?.() !== 0)
    return 'not root: the computers are Linux network namespaces (ip netns), which need root';
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
  } catch {
    return 'the `ip` command (iproute2) with network namespaces is not available';
  }
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await c.connect();
    await c.end();
  } catch (e) {
    return `no PostgreSQL at OPENCOMMS_TEST_DATABASE_URL (or the default on 5432): ${(e as Error).message}`;
  }
  return null;
}

export async function machinesBench() {
  const why = await unmeasurable();
  if (why) {
    for (const f of FIGURES) emit(f, { measured: false, reason: why });
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'oc-bench-machines-'));
  const key = newProjectKey('benchm');
  const [a, b] = NS.map((n) => new Machine(n, url)) as [Machine, Machine];
  const view = new PgStore({ url, key });
  try {
    await a.up();
    await b.up();
    const boot = async (m: Machine, sid: string, role: string, worktree: string) => {
      const agent = m.agent({
        key,
        sid,
        role,
        worktree,
        received: join(dir, `received-${m.n}`),
        leaseMs: null,
        env: { OPENCOMMS_AGENT_TRACE: '1' },
      });
      await agent.call('start');
      return agent;
    };
    const agentA = await boot(a, 'sess_a', 'Lead', '/srv/project');
    await agentA.call('create', { channel: CHANNEL });
    const agentB = await boot(b, 'sess_b', 'Reviewer', '/home/b/project');
    await agentB.call('join', { channel: CHANNEL });
    await agentA.call('serve');
    await agentB.call('serve');
    const table = `"oc_${key}".floor`;
    await admin((c) => c.query(`create table ${table} (id text primary key)`), url);
    await latency(agentA, agentB, table);
    await waiterLatency(agentA, agentB, b, key, `"oc_${key}".floor_waiter`, join(dir, 'b-project'));
    renewals([agentA, agentB]);
    await deadMachine(view, agentA, agentB, b);
  } finally {
    await view.close();
    await a.down();
    await b.down();
    await admin((c) => c.query(`drop schema if exists "oc_${key}" cascade`), url).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

async function send(from: Agent, content: string, to = 'sess_b'): Promise<string> {
  const r = await from.call<{ ok: boolean; message?: string; data: { message_ids: string[] } }>('send', {
    channel: CHANNEL,
    to,
    content,
  });
  if (!r.ok) throw new Error(`send refused: ${r.message}`);
  return r.data.message_ids[0]!;
}

async function shown(agent: Agent, id: string, ms = 10_000): Promise<number> {
  const end = Date.now() + ms;
  for (;;) {
    const at = agent.shownWall.get(id);
    if (at !== undefined) return at;
    if (Date.now() > end)
      throw new Error(`${id} was not shown at B within ${ms} ms: ${agent.logs.slice(-3).join(' | ')}`);
    await sleep(5);
  }
}

/** A computer's floor of a store call (test/netns/agent.ts `floor`), medians in ms. */
type Floor = { round_trip_ms: number; commit_ms: number; idle_round_trip_ms: number; idle_commit_ms: number };

/** The first trace point `what` of an agent at or after `t`. */
const after = (agent: Agent, what: string, t: number) => agent.traces.find((x) => x.what === what && x.at >= t)?.at;

/** Send on A until B's host is shown it, and the parts of that path: A's send committed, B woken by
 *  the notification, B caught up, B's drain begun (after its scan), B's drain committed, shown. */
async function latency(A: Agent, B: Agent, table: string) {
  for (let i = 0; i < WARM; i++) {
    await sleep(SPACING_MS);
    await shown(B, await send(A, `warm ${i}`));
  }
  const total: number[] = [];
  const parts: Record<string, number[]> = {
    send: [],
    notify: [],
    catch_up: [],
    scan: [],
    drain: [],
    hand_over: [],
  };
  for (let i = 0; i < SAMPLES; i++) {
    await sleep(SPACING_MS);
    const t0 = wall();
    const end = await shown(B, await send(A, `timed ${i}`));
    total.push(end - t0);
    const sent = after(A, 'committed', t0);
    const woken = sent && after(B, 'woken', sent);
    const looked = woken && after(B, 'looked', woken);
    const drain = looked && after(B, 'mutate', looked);
    const drained = drain && after(B, 'committed', drain);
    if (!sent || !woken || !looked || !drain || !drained || drained > end) continue;
    parts.send!.push(sent - t0);
    parts.notify!.push(woken - sent);
    parts.catch_up!.push(looked - woken);
    parts.scan!.push(drain - looked);
    parts.drain!.push(drained - drain);
    parts.hand_over!.push(end - drained);
  }
  // The floor of the path: A's send is one commit, B catches up with one round trip and drains
  // with one commit; measured from each computer right after the samples, back to back and (as
  // every sample meets them, SPACING_MS apart) after the same quiet.
  const idle = { ms: SPACING_MS, n: FLOOR_IDLE_N };
  const fa = await A.call<Floor>('floor', { table, n: FLOOR_N, idle });
  const fb = await B.call<Floor>('floor', { table, n: FLOOR_N, idle });
  const floor = fa.commit_ms + fb.round_trip_ms + fb.commit_ms;
  const floorIdle = fa.idle_commit_ms + fb.idle_round_trip_ms + fb.idle_commit_ms;
  const s = stats(total);
  emit(FIGURES[0]!, {
    unit: 'ms',
    p50: round(s.p50, 1),
    p99: round(s.p99, 1),
    n: s.n,
    target: { p50: 15, p99: 50 },
    floor: round(floor, 1),
    ratio_p50: round(s.p50 / floor),
    floor_after_quiet: round(floorIdle, 1),
    ratio_p50_after_quiet: round(s.p50 / floorIdle),
    floor_parts: { a: fa, b: fb },
    p50_by_part: Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, round(stats(v).p50, 1)])),
  });
}

/** Claude Code on computer B: the host session, and the member it is bound to. */
const CC_SESSION = 'claude-b';
const CC_MEMBER = 'sess_cc';

/** A child of computer B, the bench's view of it: when its stderr first carried bytes, what it
 *  wrote there, and its exit (code, and when it was reaped with its stdio closed), on this
 *  process's wall clock. */
function watch(child: ChildProcess) {
  let firstErr = 0;
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    firstErr ||= wall();
    err += d.toString();
  });
  const closed = new Promise<{ code: number | null; at: number }>((r) =>
    child.on('close', (code) => r({ code, at: wall() })),
  );
  return { closed, firstErr: () => firstErr, stderr: () => err };
}

/** The floor of the waiter's last part: a bare `node` on B, idle for SPACING_MS, poked on stdin,
 *  writes one line to stderr and exits 2; from its line at this process to its exit reaped (the
 *  median of FLOOR_IDLE_N). */
async function exitFloor(b: Machine): Promise<number> {
  const script = `process.stdin.once('data', () => process.stderr.write('wake\\n', () => process.exit(2)))`;
  const ms: number[] = [];
  for (let i = 0; i < FLOOR_IDLE_N; i++) {
    const child = b.spawn(process.execPath, ['-e', script], {}, ['pipe', 'ignore', 'pipe']);
    const w = watch(child);
    await sleep(SPACING_MS);
    child.stdin!.write('x');
    const { code, at } = await w.closed;
    if (code !== 2) throw new Error(`the exit floor's process ended ${code}`);
    ms.push(at - w.firstErr());
  }
  return stats(ms).p50;
}

/** Send on A until Claude Code's waiter on B has written the batch to stderr and its hook's
 *  process exited 2, the moment Claude Code sees the wake. The waiter is the installed command as
 *  Claude Code runs it (the Stop handler's `/bin/sh -c …` running the hook runner's `wait`, the
 *  hook input on stdin),
 *  with a sleeping process on B standing in for `claude` (CLAUDE_PID). Every wake ends its waiter,
 *  so each sample starts one (as the woken turn's Stop does), waits until it listens, then
 *  SPACING_MS of quiet; after the wake the batch is committed as the woken turn's hook commits it
 *  (under the hold it was drained with). The parts: A's send committed, B's drain committed (the
 *  batch in flight: its notification heard here), the batch written (its first bytes here), the
 *  waiter's exit reaped. */
async function waiterLatency(A: Agent, B: Agent, b: Machine, key: string, table: string, project: string) {
  mkdirSync(project, { recursive: true });
  await install('claude-code', project, { detect: async () => 'x', warn: () => {} });
  await writeBinding(project, insideUrl(url), key);
  const claude = b.spawn('sleep', ['infinity'], {}, 'ignore');
  const tag = processTag(claude.pid!, b.id);
  const rt = new Runtime(new PgStore({ url, key }), { tag, log: () => {} });
  // The bench's own connection: it sees the waiter listen (its LISTEN in pg_stat_activity) and
  // hears each commit's notification (A's send, then B's drain: the batch in flight).
  const watcher = new pg.Client({ connectionString: url });
  await watcher.connect();
  const notified: number[] = [];
  watcher.on('notification', () => notified.push(wall()));
  await watcher.query(`listen "oc_${key}"`);
  const listeners = async () =>
    new Set(
      (await watcher.query<{ pid: number }>(`select pid from pg_stat_activity where query like 'listen %'`)).rows.map(
        (r) => r.pid,
      ),
    );
  try {
    const joined = await rt.run({
      op: 'join',
      caller: {
        session_id: CC_MEMBER,
        host: 'claude-code',
        surface: 'mcp',
        delivery_mode: 'pull',
        host_session_id: null,
        project_id: key,
        worktree: '/home/b/project',
      },
      args: { channel: CHANNEL, role: 'Coder', role_prompt: 'Act as Coder.' },
    });
    if (!joined.ok) throw new Error(`join refused: ${joined.message}`);
    const bound = await rt.run({ op: 'bind', member: CC_MEMBER, host: 'claude-code', host_session_id: CC_SESSION });
    if (!bound.ok) throw new Error(`bind refused: ${bound.message}`);

    /** One wake: a fresh waiter, listening and quiet, then a send on A; the moments of the path. */
    const wake = async (content: string) => {
      const before = await listeners();
      const child = b.spawn(
        '/bin/sh',
        ['-c', WAIT_CMD],
        { CLAUDE_PROJECT_DIR: project, CLAUDE_PID: String(claude.pid), CLAUDE_CODE_ENTRYPOINT: 'cli' },
        ['pipe', 'ignore', 'pipe'],
      );
      child.stdin!.end(
        JSON.stringify({ hook_event_name: 'Stop', session_id: CC_SESSION, cwd: project, stop_hook_active: false }),
      );
      const w = watch(child);
      for (const end = Date.now() + 20_000; ; await sleep(10)) {
        if ([...(await listeners())].some((pid) => !before.has(pid))) break;
        if (Date.now() > end) throw new Error(`the waiter on B did not listen within 20 s: ${w.stderr()}`);
      }
      await sleep(SPACING_MS);
      const t0 = wall();
      const id = await send(A, content, CC_MEMBER);
      const { code, at } = await w.closed;
      const heard = notified.filter((n) => n >= t0);
      if (code !== 2 || !w.stderr().includes(`| id: ${id} |`))
        throw new Error(`the waiter ended ${code} without ${id}: ${w.stderr().slice(0, 300)}`);
      // Held in flight under Claude Code's tag, shown once: committed as the woken turn's hook does.
      const e = (await rt.peek()).messages[id];
      if (e?.delivery_status !== 'in_flight' || e.in_flight_by !== tag)
        throw new Error(`${id} was not in flight under ${tag} after the wake: ${e?.delivery_status}`);
      const done = await rt.run({
        op: 'commit',
        rid: CC_MEMBER,
        message_ids: [id],
        method: 'push',
        held: { by: tag, attempts: [e.attempts] },
      });
      if (!done.ok) throw new Error(`commit refused: ${done.message}`);
      return { t0, inFlight: heard[1], written: w.firstErr(), exited: at };
    };

    for (let i = 0; i < WARM; i++) await wake(`warm wake ${i}`);
    const total: number[] = [];
    const parts: Record<string, number[]> = { send: [], in_flight: [], write: [], exit: [] };
    for (let i = 0; i < SAMPLES; i++) {
      const { t0, inFlight, written, exited } = await wake(`timed wake ${i}`);
      total.push(exited - t0);
      const sent = after(A, 'committed', t0);
      if (!sent || !inFlight || sent > inFlight || inFlight > written) continue;
      parts.send!.push(sent - t0);
      parts.in_flight!.push(inFlight - sent);
      parts.write!.push(written - inFlight);
      parts.exit!.push(exited - written);
    }
    // The floor of the path, after the same quiet: A's commit, B's round trip and commit (as for
    // the agent's line, into a table of their own: the agent's floor rows are keyed by their order),
    // and a bare process's write and exit on B.
    await admin((c) => c.query(`create table ${table} (id text primary key)`), url);
    const idle = { ms: SPACING_MS, n: FLOOR_IDLE_N };
    const fa = await A.call<Floor>('floor', { table, n: FLOOR_N, idle });
    const fb = await B.call<Floor>('floor', { table, n: FLOOR_N, idle });
    const exit = await exitFloor(b);
    const floorIdle = fa.idle_commit_ms + fb.idle_round_trip_ms + fb.idle_commit_ms + exit;
    const s = stats(total);
    emit(FIGURES[1]!, {
      unit: 'ms',
      p50: round(s.p50, 1),
      p99: round(s.p99, 1),
      n: s.n,
      target: { p50: 15, p99: 50 },
      floor_after_quiet: round(floorIdle, 1),
      ratio_p50_after_quiet: round(s.p50 / floorIdle),
      floor_parts: {
        a_commit_ms: round(fa.idle_commit_ms),
        b_round_trip_ms: round(fb.idle_round_trip_ms),
        b_commit_ms: round(fb.idle_commit_ms),
        b_write_and_exit_ms: round(exit),
      },
      p50_by_part: Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, round(stats(v).p50, 1)])),
    });
  } finally {
    claude.kill('SIGKILL');
    await watcher.end();
    await rt.close();
  }
}

/** Lease queries of each process between its first and last renewal of the run, per minute. */
function renewals(agents: Agent[]) {
  const rates = agents.map((x) => {
    const renewed = x.leaseQueries.filter((q) => q.kind === 'renew').map((q) => q.at);
    const [first, last] = [renewed[0]!, renewed.at(-1)!];
    const n = x.leaseQueries.filter((q) => q.at > first && q.at <= last).length;
    return { per_minute: round((n / (last - first)) * 60_000, 1), window_s: round((last - first) / 1000, 1) };
  });
  emit(FIGURES[2]!, {
    value: Math.max(...rates.map((r) => r.per_minute)),
    per_process: rates,
    lease_ms: LEASE_MS,
    target: '≤ 12',
  });
}

/** B holds a batch in flight (its host still taking it) when the computer dies whole. */
async function deadMachine(view: PgStore, A: Agent, B: Agent, b: Machine) {
  const state = async (): Promise<Readonly<State>> => {
    await view.catchUp();
    return view.peek();
  };
  await sleep(SPACING_MS);
  await B.call('hold', { on: true });
  const id = await send(A, 'held when B dies');
  await shown(B, id);
  const lastRenewal = () => B.leaseQueries.filter((q) => q.kind === 'renew').at(-1)!.at;
  await b.down();
  const killed = wall();
  const renewedLast = lastRenewal();
  const bound = LEASE_MS + 2_000;
  for (;;) {
    if ((await state()).messages[id]?.delivery_status === 'pending') break;
    if (wall() - renewedLast > bound + 10_000) throw new Error("the dead computer's mail was not swept");
    await sleep(20);
  }
  const back = wall();
  emit(FIGURES[3]!, {
    unit: 'ms',
    value: Math.round(back - renewedLast),
    after_kill_ms: Math.round(back - killed),
    lease_ms: LEASE_MS,
    target: `≤ lease + 2 s (${bound})`,
  });
}
