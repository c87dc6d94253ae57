// One run of the scale bench (bench/scale.ts): N agents in one project under a team's load, ours or
// the floor's, over a warm-up and a measured window. Ours: each agent is our MCP server (pinned to its
// member, host claude-code) and what Claude Code runs for it: the installed hook runner's waiter;
// when the waiter exits 2 with a batch, the woken turn's UserPromptSubmit hook (which commits the
// batch in a detached process), the turn's model time, then the turn's Stop hook (which hands over
// what came meanwhile; an answer that says more waits is followed by opencomms_pull) and, at the same
// moment, a new waiter. The floor's agent: the append-only floor server and the floor waiter
// (scale-floor-waiter.ts), the same turns with no hooks. Every process is counted by role (scale-proc.ts).
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { WAIT_CMD } from '../adapters/claude-code/install.ts';
import { Runtime, openRuntime } from '../src/runtime/runtime.ts';
import { PgStore } from '../src/store/postgres/store.ts';
import { ROOT, mcpNodeFlags, now, round, stats } from './lib.ts';
import { type CpuGroups, type Host, rssMb, start } from './scale-proc.ts';
// The soak's seeded generator: the same seed gives ours and the floor the same schedule.
import { rng } from '../scripts/soak/plan.ts';

/** The load. Each agent sends every SEND_MIN_MS–SEND_MAX_MS (uniform) to 1–3 others of its channel. */
export const SEND_MIN_MS = 2_000;
export const SEND_MAX_MS = 4_000;
/** A woken turn's model time (uniform), during which no waiter runs (as in Claude Code): tens of
 *  seconds, as a model that reads and works takes; a wake's processes (waiter, UserPromptSubmit
 *  hook, its detached commit, Stop hook) cost about half a second of CPU on a 2-core computer, so
 *  32 agents with turns of a few seconds would need several cores for those alone. */
export const TURN_MIN_MS = 20_000;
export const TURN_MAX_MS = 40_000;
/** A wake counts as a wake sample when the waiter had run this long before the first message of its
 *  batch was sent: past its start-up, listening and idle, and past the delivery cooldown (1 s) of the
 *  Stop hook's hand-over that starts beside it. */
export const ARMED_MS = 1_500;
const BODY = 200;

export type Kind = 'ours' | 'floor';

export interface TeamOptions {
  kind: Kind;
  store: 'file' | 'pg';
  n: number;
  /** Members per channel: 4, or n for one channel of all. */
  group: number;
  hosts: Host[];
  /** The project folder (ours) or the floor's folder. */
  dir: string;
  cpu: CpuGroups;
  /** Unique name of this run: its cgroups' prefix. */
  label: string;
  seed: number;
  warmMs: number;
  windowMs: number;
  /** PostgreSQL: the URL the agents use (inside a namespace: its loopback), the bench's own, the
   *  project key (ours) or the floor table (floor). */
  pg?: { agentUrl: string; benchUrl: string; key?: string; table?: string };
  floorJs: string;
  floorWaiterJs: string;
  /** Called at the window's start and end (the database's counters). */
  window?: { start(): Promise<void>; end(): Promise<unknown> };
  /** Whether the database's processes are in the `db` group (a server on this computer). */
  dbCpu?: boolean;
}

interface Agent {
  i: number;
  name: string;
  role: string;
  channel: string;
  peers: number[];
  host: Host;
  mcp: { pid: number; call(name: string, a: Record<string, unknown>): Promise<any>; close(): Promise<void> };
  claude?: ChildProcess;
  cursor: number;
}

export interface TeamResult {
  send: number[];
  wake: number[];
  /** Wake samples whose sender ran on another computer than the recipient. */
  wakeCross: number[];
  delivered: { wake: number; hook: number; pull: number };
  cpuMs: Record<string, number>;
  windowMs: number;
  rss: number[];
  held: number;
  unarmed: number;
  sent: number;
  errors: string[];
  harnessCpuMs: number;
  /** Cores the whole computer kept busy in the window: ours, the bench's own and anything else. */
  machineCores: number;
  windowExtra: unknown;
}

/** Busy CPU ms of the whole computer so far (/proc/stat, every core). */
function machineBusy() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (f.reduce((a, b) => a + b, 0) - f[3]! - f[4]!) * 10;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const ID_RE = /\| id: (ocm_[0-9a-f]+) \|/g;
const idsIn = (text: string) => [...text.matchAll(ID_RE)].map((m) => m[1]!);
const HELD_RE = /held since .* by the (loop guard|wake budget)/;
const MORE_RE = /more message\(s\) are waiting for you/;

/** Waits for a child to end, its stdio closed: exit code, when (this process's clock), stdout, stderr. */
function ended(child: ChildProcess) {
  let out = '';
  let outAt = 0;
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    outAt ||= now();
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise<{ code: number | null; at: number; out: string; outAt: number; err: string }>((resolve) => {
    child.on('close', (code) => resolve({ code, at: now(), out, outAt, err }));
    child.on('error', () => resolve({ code: -1, at: now(), out, outAt, err }));
  });
}

export async function runTeam(o: TeamOptions): Promise<TeamResult> {
  const ours = o.kind === 'ours';
  const role = (r: string) => `${o.label}-${r}`;
  const runner = join(o.dir, '.opencomms', 'claude-code-hooks.mjs');
  const pgEnv: Record<string, string> = o.pg
    ? { OPENCOMMS_FLOOR_DATABASE_URL: o.pg.agentUrl, OPENCOMMS_FLOOR_TABLE: o.pg.table ?? '' }
    : {};
  const started: ChildProcess[] = [];
  const spawnOn = (host: Host, r: string, command: string, args: string[], env: Record<string, string>) => {
    const child = start(host, command, args, env, ['pipe', 'pipe', 'pipe'], { cpu: o.cpu, role: role(r) });
    started.push(child);
    return child;
  };

  async function connect(host: Host, args: string[], env: Record<string, string>) {
    const h = host.at(process.execPath, args);
    const w = o.cpu.wrap(role('servers'), h.command, h.args);
    const transport = new StdioClientTransport({
      command: w.command,
      args: w.args,
      env: { ...(process.env as Record<string, string>), ...host.env, ...env },
      stderr: 'ignore',
    });
    const client = new Client({ name: 'opencomms-scale-bench', version: '0.0.0' });
    await client.connect(transport);
    return {
      pid: transport.pid!,
      async call(name: string, a: Record<string, unknown>) {
        const r = (await client.callTool({ name, arguments: a })) as { content: Array<{ text: string }> };
        return JSON.parse(r.content[0]!.text);
      },
      close: () => client.close(),
    };
  }

  // The roster: channels of `group` members, each agent on host i mod hosts.
  const agents: Agent[] = [];
  for (let i = 0; i < o.n; i++) {
    const g = Math.floor(i / o.group);
    const members = Array.from({ length: Math.min(o.group, o.n - g * o.group) }, (_, k) => g * o.group + k);
    agents.push({
      i,
      name: ours ? `sess_scale${String(i).padStart(2, '0')}` : `f${String(i).padStart(2, '0')}`,
      role: `R${String(i).padStart(2, '0')}`,
      channel: `team${g}`,
      peers: members.filter((m) => m !== i),
      host: o.hosts[i % o.hosts.length]!,
      mcp: undefined as unknown as Agent['mcp'],
      cursor: 0,
    });
  }
  const serverArgs = ours
    ? [...mcpNodeFlags, join(ROOT, 'dist', 'opencomms-mcp.mjs'), o.dir, '--host', 'claude-code']
    : [o.floorJs, o.dir, ...(o.pg ? ['--pg'] : [])];
  const errors: string[] = [];
  const error = (e: string) => {
    if (errors.length < 20) errors.push(e.slice(0, 200));
  };

  let stopping = false;
  let stopped: () => void = () => {};
  const stop = new Promise<void>((r) => (stopped = r));
  /** A sleep that ends when the run stops. */
  const nap = (ms: number) => Promise.race([sleep(ms), stop]);
  const loops: Promise<unknown>[] = [];
  const tasks = new Set<Promise<unknown>>();
  try {
    // Servers, all starting at once as a team's sessions do.
    await Promise.all(
      agents.map(async (a) => {
        a.mcp = await connect(a.host, serverArgs, ours ? { OPENCOMMS_MEMBER_ID: a.name } : pgEnv);
      }),
    );
    if (ours) {
      for (const a of agents) {
        const first = a.i % o.group === 0;
        const r = first
          ? await a.mcp.call('opencomms_create', {
              channel: a.channel,
              role: a.role,
              role_prompt: 'work with your team',
              rate_limit: 1000,
              max_members: Math.max(2, o.group),
              max_wakes_per_member: null,
              max_wakes_per_channel: null,
            })
          : await a.mcp.call('opencomms_join', {
              channel: a.channel,
              role: a.role,
              role_prompt: 'work with your team',
            });
        if (!r.ok) throw new Error(`${a.name} could not ${first ? 'create' : 'join'} ${a.channel}: ${r.message}`);
      }
      // Each member bound to its Claude Code session, as its SessionStart hook binds it.
      const rt = o.pg
        ? new Runtime(new PgStore({ url: o.pg.benchUrl, key: o.pg.key! }), { log: () => {} })
        : openRuntime(o.dir, { log: () => {} });
      try {
        for (const a of agents) {
          const b = await rt.run({ op: 'bind', member: a.name, host: 'claude-code', host_session_id: `cc-${a.i}` });
          if (!b.ok) throw new Error(`bind ${a.name}: ${b.message}`);
        }
      } finally {
        await rt.close();
      }
      // A process standing in for each `claude` (CLAUDE_PID): alive while its session is.
      for (const a of agents)
        a.claude = start(a.host, 'sleep', ['infinity'], {}, 'ignore', { cpu: o.cpu, role: role('claude') });
    } else if (!o.pg) writeFileSync(join(o.dir, 'floor.jsonl'), '');

    // What each message's send returned at, and from which computer, by message id.
    const sentAt = new Map<string, { at: number; host: string }>();
    const sends: number[] = [];
    const wakes: number[] = [];
    const wakeCross: number[] = [];
    const delivered = { wake: 0, hook: 0, pull: 0 };
    let held = 0;
    let unarmed = 0;
    let sent = 0;
    const t0 = now();
    const w0 = t0 + o.warmMs;
    const w1 = w0 + o.windowMs;
    const inWindow = (t: number) => t >= w0 && t <= w1;
    const deliver = (route: keyof typeof delivered, at: number, count: number) => {
      if (inWindow(at)) delivered[route] += count;
    };

    const hookEnv = (a: Agent) => ({
      CLAUDE_PROJECT_DIR: o.dir,
      CLAUDE_PID: String(a.claude!.pid),
      CLAUDE_CODE_ENTRYPOINT: 'cli',
    });
    const hookInput = (a: Agent, extra: Record<string, unknown>) =>
      JSON.stringify({ session_id: `cc-${a.i}`, cwd: o.dir, ...extra });
    const hook = async (a: Agent, r: string, args: string[], input: Record<string, unknown>) => {
      const child = spawnOn(a.host, r, process.execPath, [runner, ...args], hookEnv(a));
      const done = ended(child);
      child.stdin!.end(hookInput(a, input));
      return done;
    };

    /** The turn's end: the Stop hook hands over what came meanwhile (the model reads it). */
    const stopHook = async (a: Agent) => {
      const r = await hook(a, 'hooks', [], { hook_event_name: 'Stop', stop_hook_active: false });
      if (r.code !== 0) return stopping || error(`Stop hook of ${a.name} ended ${r.code}`);
      let context = '';
      try {
        context =
          (JSON.parse(r.out) as { hookSpecificOutput?: { additionalContext?: string } }).hookSpecificOutput
            ?.additionalContext ?? '';
      } catch {
        return error(`Stop hook of ${a.name} answered ${r.out.slice(0, 80)}`);
      }
      deliver('hook', r.at, idsIn(context).length);
      if (MORE_RE.test(context))
        for (;;) {
          const p = await a.mcp.call('opencomms_pull', {});
          deliver('pull', now(), p.data?.message_ids?.length ?? 0);
          if (!p.ok || !(p.data?.remaining > 0) || stopping) break;
        }
    };
    const track = (p: Promise<unknown>) => {
      const q = p.catch((e) => error(String(e?.message ?? e)));
      tasks.add(q);
      void q.finally(() => tasks.delete(q));
    };

    const receive = async (a: Agent) => {
      const turns = rng(o.seed * 7919 + a.i);
      // Each agent is somewhere in a turn of its own when the run starts, the turns' ends spread over
      // a mean turn (as they are once the team has run a while).
      await nap(turns() * ((TURN_MIN_MS + TURN_MAX_MS) / 2));
      while (!stopping) {
        // The turn ends: Claude Code starts the Stop hook and the next waiter together.
        if (ours) track(stopHook(a));
        const spawned = now();
        const child = ours
          ? spawnOn(a.host, 'waiters', '/bin/sh', ['-c', WAIT_CMD], hookEnv(a))
          : spawnOn(
              a.host,
              'waiters',
              process.execPath,
              [
                o.floorWaiterJs,
                o.pg ? 'pg' : 'file',
                a.name,
                String(a.cursor),
                o.pg ? o.pg.table! : join(o.dir, 'floor.jsonl'),
                a.channel,
              ],
              pgEnv,
            );
        const done = ended(child);
        if (ours) child.stdin!.end(hookInput(a, { hook_event_name: 'Stop', stop_hook_active: false }));
        const r = await done;
        if (stopping) break;
        // The floor's waiter handed over what came during the turn first (its Stop hook's part).
        if (!ours && r.out) deliver('hook', r.outAt, r.out.trim().split('\n').length);
        if (r.code !== 2) {
          error(`waiter of ${a.name} ended ${r.code}: ${r.err.slice(0, 120)}`);
          await nap(500);
          continue;
        }
        let ids: string[];
        if (ours) ids = idsIn(r.err);
        else {
          const [first, ...rest] = r.err.trim().split('\n');
          a.cursor = Number(first!.split(' ')[1]);
          ids = rest.map((id) => `${id}>${a.name}`);
        }
        deliver('wake', r.at, ids.length);
        const times = ids.map((id) => sentAt.get(id)).filter((x) => x !== undefined);
        const firstSent = times.reduce((m, x) => (x.at < m.at ? x : m), times[0]!);
        if (inWindow(r.at) && firstSent) {
          if (ours && HELD_RE.test(r.err)) held++;
          else if (firstSent.at - spawned < ARMED_MS) unarmed++;
          else {
            wakes.push(r.at - firstSent.at);
            if (firstSent.host !== a.host.name) wakeCross.push(r.at - firstSent.at);
          }
        }
        // The woken turn: its prompt is the batch (the hook commits it off the turn's path).
        if (ours) {
          const u = await hook(a, 'hooks', [], { hook_event_name: 'UserPromptSubmit', prompt: r.err });
          if (u.code !== 0 && !stopping) error(`UserPromptSubmit hook of ${a.name} ended ${u.code}`);
        }
        await nap(TURN_MIN_MS + turns() * (TURN_MAX_MS - TURN_MIN_MS));
      }
    };

    const sendLoop = async (a: Agent) => {
      const pick = rng(o.seed * 104_729 + a.i);
      let next = t0 + pick() * SEND_MAX_MS;
      let seq = 0;
      while (!stopping) {
        await nap(next - now());
        if (stopping) break;
        const k = 1 + Math.floor(pick() * Math.min(3, a.peers.length));
        const order = [...a.peers];
        for (let j = order.length - 1; j > 0; j--) {
          const s = Math.floor(pick() * (j + 1));
          [order[j], order[s]] = [order[s]!, order[j]!];
        }
        const to = order.slice(0, k).map((p) => agents[p]!);
        // To all the others: one broadcast; else one send per recipient.
        const calls = k === a.peers.length && k > 1 ? [to] : to.map((p) => [p]);
        for (const group of calls) {
          const body = `${a.role} ${seq++} `.padEnd(BODY, '.');
          const t = now();
          let ids: string[] = [];
          try {
            if (ours) {
              const r = await a.mcp.call('opencomms_send', {
                channel: a.channel,
                content: body,
                ...(group.length > 1 ? { broadcast: true } : { to: group[0]!.name }),
              });
              if (!r.ok) error(`send of ${a.name} refused: ${r.message}`);
              else ids = r.data.message_ids;
            } else {
              const id = `${a.name}-${seq}`;
              const r = await a.mcp.call('send', {
                channel: a.channel,
                content: `to:,${group.map((p) => p.name).join(',')},|${id}|${body}`,
              });
              if (!r.ok) error(`floor send of ${a.name} refused`);
              else ids = group.map((p) => `${id}>${p.name}`);
            }
          } catch (e) {
            if (!stopping) error(`send of ${a.name}: ${(e as Error).message}`);
            break;
          }
          const at = now();
          for (const id of ids) sentAt.set(id, { at, host: a.host.name });
          if (inWindow(t) && inWindow(at)) {
            sends.push(at - t);
            sent += ids.length;
          }
        }
        next = Math.max(next + SEND_MIN_MS + pick() * (SEND_MAX_MS - SEND_MIN_MS), now());
      }
    };

    for (const a of agents) loops.push(receive(a).catch((e) => error(String(e?.message ?? e))));
    for (const a of agents) loops.push(sendLoop(a).catch((e) => error(String(e?.message ?? e))));

    const roles = ['servers', 'waiters', 'hooks'];
    await sleep(w0 - now());
    const cpu0 = Object.fromEntries(roles.map((r) => [r, o.cpu.usageMs(role(r))]));
    const db0 = o.dbCpu ? o.cpu.usageMs('db') : 0;
    const harness0 = process.cpuUsage();
    const machine0 = machineBusy();
    await o.window?.start();
    await sleep(w1 - now());
    const cpuMs: Record<string, number> = Object.fromEntries(
      roles.map((r) => [r, round(o.cpu.usageMs(role(r)) - cpu0[r]!, 1)]),
    );
    if (o.dbCpu) cpuMs.database = round(o.cpu.usageMs('db') - db0, 1);
    const h = process.cpuUsage(harness0);
    const machine = round((machineBusy() - machine0) / o.windowMs, 2);
    const windowExtra = await o.window?.end();
    const rss = agents.map((a) => rssMb(a.mcp.pid)).filter((x): x is number => x !== null);
    stopping = true;
    stopped();
    return {
      send: sends,
      wake: wakes,
      wakeCross,
      delivered,
      cpuMs,
      windowMs: o.windowMs,
      rss,
      held,
      unarmed,
      sent,
      errors,
      harnessCpuMs: round((h.user + h.system) / 1000, 1),
      machineCores: machine,
      windowExtra,
    };
  } finally {
    stopping = true;
    stopped();
    // Every process this run started: waiters and hooks first (a waiter's SIGKILL leaves its batch in
    // flight; nothing reads this project again), then the servers, then the stand-ins for `claude`.
    for (const r of ['waiters', 'hooks']) o.cpu.kill(role(r));
    await Promise.race([Promise.all([...loops, ...tasks]), sleep(5_000)]);
    await Promise.all(agents.map((a) => a.mcp?.close().catch(() => {})));
    await sleep(200);
    for (const r of ['servers', 'waiters', 'hooks', 'claude']) o.cpu.kill(role(r));
    for (const a of agents) a.claude?.kill('SIGKILL');
    for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}

/** The figures of one run, for its JSON line. */
export function summarize(r: TeamResult) {
  const total = Object.values(r.cpuMs).reduce((a, b) => a + b, 0);
  const delivered = r.delivered.wake + r.delivered.hook + r.delivered.pull;
  // Per message: the window's envelopes sent, each delivered once. Not the window's deliveries: those
  // come in batches a turn (20–40 s) apart, so a window's count is a fraction of its sends that
  // depends on where the turns fall; both count the same messages in the long run.
  const per = (ms: number) => (r.sent ? round(ms / r.sent, 2) : null);
  const s = stats(r.send);
  const w = stats(r.wake);
  const rss = [...r.rss].sort((a, b) => a - b);
  return {
    send_ms: { p50: round(s.p50, 2), p99: round(s.p99, 2), n: s.n },
    wake_ms: { p50: round(w.p50, 1), p99: round(w.p99, 1), n: w.n },
    cpu_ms_per_message: per(total),
    cpu_ms_per_message_by_role: Object.fromEntries(Object.entries(r.cpuMs).map(([k, v]) => [k, per(v)])),
    cpu_ms_per_message_delivered_in_window: delivered ? round(total / delivered, 2) : null,
    // N = 2 sends one envelope a call (one peer), N >= 4 two on average: per call beside per envelope.
    cpu_ms_per_send_call: s.n ? round(total / s.n, 2) : null,
    cores_busy: round(total / r.windowMs, 2),
    computer_cores_busy: r.machineCores,
    delivered: { ...r.delivered, total: delivered },
    envelopes_sent: r.sent,
    rss_mb: rss.length ? { median: rss[Math.floor((rss.length - 1) / 2)]!, max: rss.at(-1)! } : null,
    wakes_not_sampled: { waiter_not_yet_armed: r.unarmed, held_by_wake_guard: r.held },
    harness_cpu_ms_per_message: per(r.harnessCpuMs),
    ...(r.errors.length ? { errors: r.errors.slice(0, 5), error_count: r.errors.length } : {}),
  };
}
