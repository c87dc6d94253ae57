// `npm run bench -- scale`: N = 2, 8, 16, 32 agents in one project, on the file store, on PostgreSQL
// and on PostgreSQL over three computers (network namespaces), each beside the floor of the same load.
// The load (bench/scale-team.ts): channels of 4 (N = 2: one of 2; at N = 32 also one channel of all);
// each agent sends a 200-character message every 2–4 s to 1–3 others of its channel (a seeded
// schedule, the same for ours and the floor), and reads what it gets as Claude Code does: its waiter
// wakes it, the woken turn's hook commits the batch, the turn lasts 20–40 s of model time, its Stop
// hook hands over what came meanwhile, and a new waiter starts. A 3 s warm-up, then a measured window.
// CPU: every process the run started, exited ones included (cgroups: bench/scale-proc.ts), and on
// PostgreSQL the database's processes, per envelope sent in the window (each is delivered once; a
// window's deliveries come a turn later). Needs root; without it one line says why. Writes docs/scale.svg.
// BENCH_SCALE_NS=2,8 runs only those N, BENCH_SCALE_ONLY=file|pg one store (shorter runs while tuning).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { install } from '../src/cli/hosts.ts';
import { writeBinding } from '../src/store/binding.ts';
import { newProjectKey } from '../test/helpers/postgres.ts';
import { Machine, insideUrl } from '../test/netns/net.ts';
import { ROOT, bundle, emit, emitRatio, now, round } from './lib.ts';
import { CpuGroups, type Host, localHost, machineHost } from './scale-proc.ts';
import { type Panel, scaleSvg } from './scale-svg.ts';
import {
  ARMED_MS,
  type Kind,
  SEND_MAX_MS,
  SEND_MIN_MS,
  TURN_MAX_MS,
  TURN_MIN_MS,
  type TeamOptions,
  runTeam,
  summarize,
} from './scale-team.ts';

const NS = (process.env.BENCH_SCALE_NS?.split(',').map(Number) ?? [2, 8, 16, 32]) as readonly number[];
const MACHINE_NS = [8, 32] as const;
const GROUP = 4;
const WARM_MS = 3_000;
/** The measured window: longer at N = 2, whose few turns would leave a short window's CPU per
 *  message to chance (and cost little); the floor's shorter, its figures steadier (no hooks). */
const windowMs = (n: number, kind: Kind, group: number) =>
  n <= 2 ? (kind === 'ours' ? 40_000 : 15_000) : group === n ? 10_000 : kind === 'ours' ? 15_000 : 10_000;
/** Namespace numbers of their own: test:machines takes 1–2, the soak 11 up, bench -- machines 21–22. */
const NETNS = [31, 32, 33] as const;
const SVG = join(ROOT, 'docs', 'scale.svg');

type Summary = ReturnType<typeof summarize>;
type Store = 'file' | 'pg' | 'pg3';
const results: Record<Store, Map<number, { ours: Summary; floor: Summary }>> = {
  file: new Map(),
  pg: new Map(),
  pg3: new Map(),
};

const LOAD = {
  agents_per_channel: GROUP,
  send_every_ms: `${SEND_MIN_MS}–${SEND_MAX_MS}`,
  recipients: '1–3 of its channel (all others: one broadcast; else one send each)',
  body_chars: 200,
  turn_ms: `${TURN_MIN_MS}–${TURN_MAX_MS}`,
  warm_up_ms: WARM_MS,
  window_ms: 'N = 2: 40000 (the floor 15000); else 15000 (the floor 10000); one channel of 32: 10000',
};
const WHAT = {
  send: "opencomms_send's round trip at the agent (the floor: its send call)",
  wake: `send returned → the recipient's waiter exited 2 with the batch, for waiters that had run ${ARMED_MS} ms (listening, idle)`,
  cpu: "CPU of every process the run started (servers, waiters, hooks and their detached commits; on PostgreSQL the database) in the window, per envelope sent in it (each is delivered once; the window's own deliveries, batched a turn apart, are printed beside it)",
  floor:
    'the floor server (bench/floor-server.ts; --pg on PostgreSQL) per agent with the same schedule, and a bare node waiter (bench/scale-floor-waiter.ts) per agent watching its file or LISTENing, the same turns, no hooks',
};

function withoutPassword(url: string) {
  const u = new URL(url);
  if (u.password) process.env.PGPASSWORD = decodeURIComponent(u.password);
  u.password = '';
  return u.href;
}

/** The database's connections and transactions over a window (a database of the bench's own, so
 *  nothing else is counted), from the bench's connection to another database. */
class DbWatch {
  private samples: number[] = [];
  private foreign = 0;
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> = Promise.resolve();
  private x0 = 0;
  private t0 = 0;

  constructor(
    private readonly admin: pg.Client,
    private readonly db: string,
  ) {}

  private async xacts() {
    const r = await this.admin.query<{ x: string }>(
      'select xact_commit + xact_rollback as x from pg_stat_database where datname = $1',
      [this.db],
    );
    return Number(r.rows[0]?.x ?? 0);
  }

  private poll = () =>
    (this.polling = this.polling.then(async () => {
      const r = await this.admin.query<{ ours: number; other: number }>(
        `select count(*) filter (where datname = $1)::int as ours,
                count(*) filter (where datname is not null and datname <> $1 and pid <> pg_backend_pid())::int as other
         from pg_stat_activity`,
        [this.db],
      );
      this.samples.push(r.rows[0]!.ours);
      this.foreign = Math.max(this.foreign, r.rows[0]!.other);
    }));

  async start() {
    this.samples = [];
    this.foreign = 0;
    this.x0 = await this.xacts();
    this.t0 = now();
    await this.poll();
    this.timer = setInterval(() => void this.poll(), 500);
  }

  async end() {
    if (this.timer) clearInterval(this.timer);
    await this.poll();
    const minutes = (now() - this.t0) / 60_000;
    const x = await this.xacts();
    const s = this.samples;
    return {
      connections_max: Math.max(...s),
      connections_mean: round(s.reduce((a, b) => a + b, 0) / s.length, 1),
      transactions_per_min: Math.round((x - this.x0) / minutes),
      other_databases_connections_max: this.foreign,
    };
  }
}

interface Env {
  cpu: CpuGroups;
  floorJs: string;
  floorWaiterJs: string;
  tmp: string;
}

interface PgEnv {
  benchUrl: string;
  admin: pg.Client;
  watch: DbWatch;
  dbCpu: boolean;
}

let runs = 0;

/** One run of a team: its own project (ours) or folder (the floor), cleaned up after. */
async function team(
  env: Env,
  kind: Kind,
  store: Store,
  n: number,
  group: number,
  hosts: Host[],
  pgEnv: PgEnv | null,
  agentUrl: string | null,
) {
  const label = `r${++runs}-${store}-${kind}-n${n}`;
  const dir = mkdtempSync(join(env.tmp, `${label}-`));
  try {
    const o: TeamOptions = {
      kind,
      store: store === 'file' ? 'file' : 'pg',
      n,
      group,
      hosts,
      dir,
      cpu: env.cpu,
      label,
      seed: n * 31 + group,
      warmMs: WARM_MS,
      windowMs: windowMs(n, kind, group),
      floorJs: env.floorJs,
      floorWaiterJs: env.floorWaiterJs,
    };
    if (pgEnv && agentUrl) {
      o.window = pgEnv.watch;
      o.dbCpu = pgEnv.dbCpu;
      if (kind === 'ours') {
        const key = newProjectKey('scale');
        await writeBinding(dir, agentUrl, key);
        o.pg = { agentUrl, benchUrl: pgEnv.benchUrl, key };
      } else {
        const table = `floor_${label.replace(/[^a-z0-9]/g, '_')}`;
        const c = new pg.Client(pgEnv.benchUrl);
        await c.connect();
        await c.query(
          `create table ${table} (n bigserial primary key, channel text not null, body jsonb not null);
           create trigger ${table}_notify after insert on ${table} for each row execute function ocf_notify()`,
        );
        await c.end();
        o.pg = { agentUrl, benchUrl: pgEnv.benchUrl, table };
      }
    }
    if (kind === 'ours') await install('claude-code', dir, { detect: async () => 'x', warn: () => {} });
    const r = await runTeam(o);
    return { line: { ...summarize(r), ...(r.windowExtra ? { database: r.windowExtra } : {}) }, cross: r.wakeCross };
  } finally {
    rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  }
}

/** A run that could not be measured: its line says why, and the next runs go on. */
async function orSay<T>(figure: string, run: () => Promise<T>): Promise<T | null> {
  try {
    return await run();
  } catch (e) {
    emit(figure, { measured: false, reason: String((e as Error)?.message ?? e).split('\n')[0] });
    return null;
  }
}

/** Ours and the floor at N, then their line. */
async function both(env: Env, store: Store, n: number, hosts: Host[], pgEnv: PgEnv | null, agentUrl: string | null) {
  const r = await orSay(`scale_${store}_n${n}`, async () => ({
    ours: await team(env, 'ours', store, n, Math.min(GROUP, n), hosts, pgEnv, agentUrl),
    floor: await team(env, 'floor', store, n, Math.min(GROUP, n), hosts, pgEnv, agentUrl),
  }));
  if (!r) return null;
  const { ours, floor } = r;
  results[store].set(n, { ours: ours.line, floor: floor.line });
  emit(`scale_${store}_n${n}`, {
    ...ours.line,
    floor: floor.line,
    ...(store === 'pg3' ? { computers: hosts.length } : {}),
    target:
      n === 32 && store !== 'pg3'
        ? 'cpu_ms_per_message <= 1.5x N = 2; send p99 <= 4x the floor; wake p99 <= 50 ms'
        : 'reported',
  });
  return { ours, floor };
}

/** The N = 32 team in one channel of all: reported, where cost stops being flat. */
async function oneChannel(env: Env, store: Store, pgEnv: PgEnv | null, agentUrl: string | null) {
  const ours = await orSay(`scale_${store}_n32_one_channel`, () =>
    team(env, 'ours', store, 32, 32, [localHost], pgEnv, agentUrl),
  );
  if (!ours) return;
  emit(`scale_${store}_n32_one_channel`, {
    ...ours.line,
    agents_per_channel: 32,
    target: 'reported (no target): all 32 in one channel',
  });
}

function ratios(store: 'file' | 'pg') {
  const at = results[store];
  const [two, top] = [at.get(2), at.get(32)];
  if (!two || !top) return;
  const cpu2 = two.ours.cpu_ms_per_message;
  const cpu32 = top.ours.cpu_ms_per_message;
  if (cpu2 && cpu32)
    emitRatio(`scale_${store}_cpu_per_message_n32_over_n2`, cpu32, cpu2, '<= 1.5', {
      unit: 'CPU ms per message (envelopes sent in the window)',
      floor_is: 'ours at N = 2 in the same run',
      floor_server: { n2: two.floor.cpu_ms_per_message, n32: top.floor.cpu_ms_per_message },
      per_send_call: {
        n2: two.ours.cpu_ms_per_send_call,
        n32: top.ours.cpu_ms_per_send_call,
        ratio:
          two.ours.cpu_ms_per_send_call && top.ours.cpu_ms_per_send_call
            ? round(top.ours.cpu_ms_per_send_call / two.ours.cpu_ms_per_send_call)
            : null,
        note: 'N = 2 sends one envelope a call, N >= 4 two on average',
      },
    });
  emitRatio(`scale_${store}_send_p99_n32_over_floor`, top.ours.send_ms.p99, top.floor.send_ms.p99, '<= 4', {
    unit: 'ms',
    floor_is: 'the floor server under the same load at N = 32, same run',
  });
  emit(`scale_${store}_wake_p99_n32`, {
    unit: 'ms',
    value: top.ours.wake_ms.p99,
    p50: top.ours.wake_ms.p50,
    n: top.ours.wake_ms.n,
    floor: top.floor.wake_ms,
    target: '<= 50',
  });
}

/** Why computers cannot be made here, or null. */
function noNamespaces(): string | null {
  if (process.getuid?.() !== 0)
    return 'not root: the computers are Linux network namespaces (ip netns), which need root';
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
    return null;
  } catch {
    return 'the `ip` command (iproute2) with network namespaces is not available';
  }
}

/** A forwarder inside each namespace for its loopback PostgreSQL port (as test/netns/agent.ts has). */
async function forwarders(machines: Machine[]) {
  await Promise.all(
    machines.map(
      (m) =>
        new Promise<void>((resolve, reject) => {
          const child = m.spawn(
            process.execPath,
            ['--import', 'tsx', join(import.meta.dirname, 'scale-forward.ts'), m.gateway],
            {},
            ['ignore', 'pipe', 'inherit'],
          );
          child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
          child.on('exit', (code) => reject(new Error(`the forwarder in ${m.ns} exited ${code}`)));
        }),
    ),
  );
}

/** The postmaster of a server on this computer and its processes, in the `db` group; false when the
 *  server's processes are not visible here (another computer, a container). */
async function databaseInGroup(admin: pg.Client, cpu: CpuGroups): Promise<boolean> {
  const self = (await admin.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  const ppid = (pid: number) => {
    try {
      return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
    } catch {
      return 0;
    }
  };
  const postmaster = ppid(self);
  if (!postmaster) return false;
  cpu.move(postmaster, 'db');
  for (const d of readdirSync('/proc'))
    if (/^\d+$/.test(d) && ppid(Number(d)) === postmaster) cpu.move(Number(d), 'db');
  cpu.toRoot(self); // the bench's own queries are not the project's
  return true;
}

async function postgresRuns(env: Env) {
  const base = withoutPassword(process.env.OPENCOMMS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
  const admin = new pg.Client({ connectionString: base, connectionTimeoutMillis: 5_000 });
  try {
    await admin.connect();
  } catch (e) {
    const reason = `no PostgreSQL at OPENCOMMS_TEST_DATABASE_URL (or the default on 5432): ${(e as Error).message}`;
    for (const f of ['scale_pg', 'scale_machines']) emit(f, { measured: false, reason });
    return;
  }
  const db = `ocscale_${randomBytes(4).toString('hex')}`;
  const u = new URL(base);
  u.pathname = `/${db}`;
  const benchUrl = u.href;
  try {
    await admin.query(`create database ${db}`);
    const c = new pg.Client(benchUrl);
    await c.connect();
    await c.query(`create function ocf_notify() returns trigger language plpgsql as $$
      declare r text;
      begin
        foreach r in array string_to_array(trim(both ',' from split_part(substr(new.body->>'content', 4), '|', 1)), ',') loop
          perform pg_notify('ocf_' || r, new.n::text);
        end loop;
        return null;
      end $$`);
    await c.end();
    const dbCpu = await databaseInGroup(admin, env.cpu);
    const pgEnv: PgEnv = { benchUrl, admin, watch: new DbWatch(admin, db), dbCpu };
    for (const n of NS) await both(env, 'pg', n, [localHost], pgEnv, benchUrl);
    ratios('pg');
    if (NS.includes(32)) await oneChannel(env, 'pg', pgEnv, benchUrl);

    const why = noNamespaces();
    if (why) emit('scale_machines', { measured: false, reason: why });
    else {
      const machines = NETNS.map((k) => new Machine(k, benchUrl));
      try {
        for (const m of machines) await m.up();
        await forwarders(machines);
        const hosts = machines.map(machineHost);
        for (const n of MACHINE_NS.filter((k) => NS.includes(k))) {
          const r = await both(env, 'pg3', n, hosts, pgEnv, insideUrl(benchUrl));
          if (!r) continue;
          const { ours, floor } = r;
          const [a, f] = [stat(ours.cross), stat(floor.cross)];
          emit(`scale_pg3_cross_wake_n${n}`, {
            unit: 'ms',
            p50: a.p50,
            p99: a.p99,
            n: a.n,
            floor: f,
            ratio_p50: f.p50 ? round(a.p50 / f.p50) : null,
            target: { ratio_p50: '<= 2', p99: '<= 50' },
            what: "send on computer A returned → the recipient's waiter on computer B exited 2, under the same load; the floor's waiter the same way across computers (after the same quiet: waiters that had run 1.5 s)",
          });
        }
      } finally {
        for (const m of machines) await m.down();
      }
    }
  } finally {
    env.cpu.release('db');
    await admin.query(`drop database if exists ${db} with (force)`).catch(() => {});
    await admin.end();
  }
}

function stat(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
  return { p50: round(at(0.5), 1), p99: round(at(0.99), 1), n: s.length };
}

function writeSvg() {
  const series = (get: (s: Summary) => number | null) =>
    (
      [
        ['file store', '#1f77b4', 'file'],
        ['PostgreSQL', '#d62728', 'pg'],
        ['PostgreSQL, 3 computers', '#2ca02c', 'pg3'],
      ] as const
    ).flatMap(([name, color, store]) =>
      [false, true].map((floor) => ({
        name: floor ? `${name}: floor` : name,
        color,
        floor,
        points: [...results[store].entries()].map(([n, r]) => ({ n, y: get(floor ? r.floor : r.ours) })),
      })),
    );
  const panels: Panel[] = [
    {
      title: 'CPU of all processes per message',
      unit: 'CPU ms / message',
      series: series((s) => s.cpu_ms_per_message),
    },
    { title: 'send p99', unit: 'ms', series: series((s) => s.send_ms.p99) },
  ];
  writeFileSync(
    SVG,
    scaleSvg(
      panels,
      [...NS],
      `npm run bench -- scale, ${new Date().toISOString().slice(0, 10)}: channels of 4, a send every 2–4 s per agent`,
    ),
  );
}

export async function scaleBench() {
  const cpu = CpuGroups.open();
  if (typeof cpu === 'string') {
    emit('scale', { measured: false, reason: cpu });
    return;
  }
  const tmp = mkdtempSync(join(tmpdir(), 'oc-bench-scale-'));
  const t = now();
  // Interrupted: the database's processes leave the bench's group, the bench's own processes end.
  const interrupted = () => {
    cpu.abandon();
    if (!noNamespaces()) for (const k of NETNS) Machine.clean(k);
    rmSync(tmp, { recursive: true, force: true });
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    const env: Env = {
      cpu,
      tmp,
      floorJs: join(tmp, 'floor-server.mjs'),
      floorWaiterJs: join(tmp, 'scale-floor-waiter.mjs'),
    };
    await bundle(join(import.meta.dirname, 'floor-server.ts'), env.floorJs);
    await bundle(join(import.meta.dirname, 'scale-floor-waiter.ts'), env.floorWaiterJs);
    emit('scale_load', { ...LOAD, what: WHAT, target: 'the load and what each figure of the scale_* lines measures' });
    const only = process.env.BENCH_SCALE_ONLY; // file | pg: one store (a shorter run while tuning)
    if (only !== 'pg') {
      for (const n of NS) await both(env, 'file', n, [localHost], null, null);
      ratios('file');
      if (NS.includes(32)) await oneChannel(env, 'file', null, null);
    }
    if (only !== 'file') await postgresRuns(env);
    writeSvg();
    emit('scale_wall_time', { unit: 's', value: round((now() - t) / 1000, 1), svg: 'docs/scale.svg' });
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    cpu.remove();
    rmSync(tmp, { recursive: true, force: true, maxRetries: 5 });
  }
}
