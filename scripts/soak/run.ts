// `npm run soak`: a crash soak of one project. Four writer processes and two
// push owners work on one project while a random one of them is SIGKILLed at random moments and
// restarted; a checker process loads the state through a fresh store all along. Then the killing
// stops, everyone drains, a final sweep runs, and one JSON line says what was lost, duplicated,
// reordered or stuck (scripts/soak/analyse.ts). Files and loopback only; bounded in kills and time.
//
//   npm run soak                  ≥ 200 kills (the full run, < 10 min on 2 cores)
//   npm run soak -- --short       ≥ 20 kills (~1 min; what CI runs)
//   options: --kills N  --max-seconds S  --interval MIN-MAX (ms between kills)  --seed N  --keep
//            --compact-bytes N (the workers' journal size per snapshot: small = many compactions,
//            killed mid-way and followed by their seals)
//   npm run soak -- --store postgres   the same on the PostgreSQL store: the soak's own server
//                                 (postgres.ts), restarted --pg-restarts N times during the killing
//   npm run soak -- --store postgres --machines 3   writers and owners on 3 machines (network
//                                 namespaces, root only; target.ts) with a short lease, and
//                                 --outages N whole machines killed or partitioned (outages.ts)
//   npm run soak -- --faults      instead: every injected file-system fault of the store's write
//                                 path and every cut of the journal's last line (faults.ts)
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { build } from 'esbuild';
import type { Caller } from '../../src/engine/index.ts';
import type { Envelope } from '../../src/protocol/schema.ts';
import { processAlive } from '../../src/runtime/runtime.ts';
import { leaseMs } from '../../src/runtime/lease.ts';
import { PgStore } from '../../src/store/postgres/store.ts';
import { analyse, verdict, type Report } from './analyse.ts';
import { faults } from './faults.ts';
import { Managed } from './managed.ts';
import { outage, type OutageKind } from './outages.ts';
import { CHANNELS, OWNERS, SOAK_COMPACT_BYTES, WRITERS, rng, type Rng } from './plan.ts';
import {
  readLog,
  type CheckRecord,
  type Incarnation,
  type Outage,
  type PromptRecord,
  type WriterRecord,
} from './records.ts';
import { SOAK_KEY, Target } from './target.ts';

const root = join(import.meta.dirname, '..', '..');

interface Options {
  kills: number;
  maxSeconds: number;
  interval: [number, number];
  seed: number;
  keep: boolean;
  compactBytes: number | null;
  store: 'file' | 'postgres';
  machines: number;
  pgRestarts: number;
  outages: number;
}

/** The full run: 220 kills at 0.4–2.6 s (mean 1.5 s) is ~5.5 min of killing, leaving room for
 *  start-up and the final drain inside 10 min on 2 shared cores. The short run keeps ≥ 20 kills
 *  within CI's budget. `maxSeconds` bounds the killing phase whatever the machine's speed. */
const FULL = { kills: 220, maxSeconds: 450, interval: '400-2600', pgRestarts: 4, outages: 6 };
const SHORT = { kills: 24, maxSeconds: 75, interval: '400-2600', pgRestarts: 3, outages: 2 };
/** On PostgreSQL a kill costs more (a restarted process connects, loads and takes a lease), and
 *  with machines each outage stops the killing for ~10 s: 210 kills at 0.25–1.85 s still end
 *  inside 10 min on 2 loaded cores. */
const PG_FULL = { ...FULL, kills: 210, maxSeconds: 470, interval: '250-1850' };
/** Two computer outages (each up to ~25 s with its wait for a hand-over) within the short run's
 *  kills: at the PostgreSQL pace and with more time, still under 2 min on a quiet machine. */
const MACHINES_SHORT = { ...SHORT, maxSeconds: 100, interval: '250-1850' };
/** The lease of every process with `--machines` (OPENCOMMS_LEASE_MS): short, so that a machine
 *  out costs seconds and the run stays within minutes; the rule is the same at the default 15 s. */
const SOAK_LEASE_MS = 3_000;
/** Writers pause 50–250 ms between actions: ~20 sends/s over two channels stays under the
 *  1000/min rate limit set below, and owners (20 per batch, 1 s cooldown) keep up. */
const WRITER_PACE = '50-250';
/** A host takes up to this long to accept a prompt (OpenCode's promptAsync answers in tens of
 *  ms): the drain→commit window, so that some kills land in it on every run. */
const HOST_LATENCY_MS = 150;
/** With machines, hosts take longer: a machine cut off then holds mail in flight more often, so
 *  partitions meet late commits to fence. */
const MACHINES_HOST_LATENCY_MS = 400;
/** How long the final drain may take before the leftovers count as pending. */
const DRAIN_TIMEOUT_MS = 90_000;

function options(argv: string[]): Options {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const short = argv.includes('--short');
  const base = short ? (arg('--machines') ? MACHINES_SHORT : SHORT) : arg('--store') === 'postgres' ? PG_FULL : FULL;
  const interval = /^(\d+)-(\d+)$/.exec(arg('--interval') ?? base.interval)!;
  return {
    kills: Number(arg('--kills') ?? base.kills),
    maxSeconds: Number(arg('--max-seconds') ?? base.maxSeconds),
    interval: [Number(interval[1]), Number(interval[2])],
    seed: Number(arg('--seed') ?? Math.floor(Math.random() * 2 ** 31)),
    keep: argv.includes('--keep'),
    compactBytes: arg('--compact-bytes') === undefined ? null : Number(arg('--compact-bytes')),
    store: arg('--store') === 'postgres' ? 'postgres' : 'file',
    machines: Number(arg('--machines') ?? 0),
    // A server restart with machines would expire every lease at once: asked for, not by default.
    pgRestarts: Number(arg('--pg-restarts') ?? (arg('--machines') ? 0 : base.pgRestarts)),
    outages: Number(arg('--outages') ?? base.outages),
  };
}

async function setUp(target: Target) {
  const caller = (sid: string, mode: 'push' | 'pull'): Caller => ({
    session_id: sid,
    host: 'soak',
    surface: 'cli',
    delivery_mode: mode,
    host_session_id: sid,
    project_id: 'local-project',
    worktree: target.project,
  });
  const members = [...WRITERS.map((w) => caller(w, 'pull')), ...OWNERS.map((o) => caller(o, 'push'))];
  for (const channel of CHANNELS)
    for (const [i, c] of members.entries()) {
      // Each member joins from its own machine, so the state records where its session runs.
      const rt = target.openAs(c.session_id);
      const role = c.session_id.toUpperCase();
      const r =
        i === 0
          ? await rt.run({
              op: 'create',
              caller: c,
              args: { channel, role, role_prompt: 'soak', rate_limit: 1000, max_hops: 50 },
            })
          : await rt.run({ op: 'join', caller: c, args: { channel, role, role_prompt: 'soak' } });
      await rt.close();
      if (!r.ok) throw new Error(`set-up: ${c.session_id} on ${channel}: ${r.message}`);
    }
}

/** Every envelope the store knows, through its own API: history logs, then live state on top. */
async function finalEnvelopes(
  target: Target,
): Promise<{ envelopes: Envelope[]; inFlight: number; fenced: Array<{ at: number; message: string }> }> {
  const rt = target.open();
  const state = await rt.read();
  const all = new Map<string, Envelope>();
  for (const ch of Object.values(state.channels))
    for (const e of await rt.store.history(ch.id, Number.MAX_SAFE_INTEGER)) all.set(e.message_id, e);
  for (const e of Object.values(state.messages)) all.set(e.message_id, e);
  await rt.close();
  return {
    envelopes: [...all.values()],
    inFlight: Object.values(state.messages).filter((e) => e.delivery_status === 'in_flight').length,
    fenced: state.errors.filter((e) => e.reason === 'hold_lost'),
  };
}

async function drained(target: Target, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const rt = target.open();
    const state = await rt.read();
    await rt.close();
    if (
      !Object.values(state.messages).some((e) => e.delivery_status === 'pending' || e.delivery_status === 'in_flight')
    )
      return true;
    await sleep(200);
  }
  return false;
}

/** The soak's processes: writers, owners and the checker, each started where the target puts it. */
function cast(target: Target, bundle: string, records: string, random: Rng, log: NodeJS.WritableStream) {
  const lives: Incarnation[] = [];
  const seedOf = () => String(Math.floor(random() * 2 ** 31));
  const project = target.project;
  const latency = target.machines.length ? MACHINES_HOST_LATENCY_MS : HOST_LATENCY_MS;
  const role = (name: string, argv: (inc: number) => string[]) =>
    new Managed(name, argv, target.spawner(bundle, name, process.env), log, lives);
  const writers = WRITERS.map((w) =>
    role(w, (inc) => ['writer', project, records, w, String(inc), seedOf(), WRITER_PACE]),
  );
  const owners = OWNERS.map((o) =>
    role(o, (inc) => ['owner', project, records, o, String(inc), seedOf(), String(latency)]),
  );
  const checker = role('checker', () => ['checker', project, records]);
  return { lives, writers, owners, checker, victims: [...writers, ...owners] };
}

type Cast = ReturnType<typeof cast>;

/** Restarts of the PostgreSQL server spread over the expected killing time, alternating a crash
 *  (`immediate`) and a clean stop (`fast`), while the kills go on; `done` counts them as they end
 *  (the killing lasts until the last has). */
async function restarts(target: Target, opts: Options, until: () => boolean, done: { restarts: number }) {
  if (!target.pg || opts.pgRestarts === 0) return 0;
  const killing = Math.min(opts.maxSeconds * 1000, (opts.kills * (opts.interval[0] + opts.interval[1])) / 2);
  const started = Date.now();
  for (let k = 1; k <= opts.pgRestarts && !until(); k++) {
    const at = started + (k * killing) / (opts.pgRestarts + 1);
    while (Date.now() < at && !until()) await sleep(100);
    if (until()) break;
    await target.pg.restart(k % 2 ? 'immediate' : 'fast');
    done.restarts++;
  }
  return done.restarts;
}

/** The killing phase: single SIGKILLs at random moments, whole machines out at evenly spaced
 *  kill counts (killed and partitioned in turn, over every machine), PostgreSQL restarts beside. */
async function killing(target: Target, opts: Options, random: Rng, c: Cast, records: string) {
  let kills = 0;
  const outages: Outage[] = [];
  const killUntil = Date.now() + opts.maxSeconds * 1000;
  // The kills go on until the last server restart has been made: random intervals may spend the
  // kills before the schedule's last restart comes.
  const wanted = target.pg ? opts.pgRestarts : 0;
  const done = { restarts: 0 };
  const timeUp = () => Date.now() >= killUntil;
  const stop = () => timeUp() || (kills >= opts.kills && done.restarts >= wanted);
  const restarted = restarts(target, opts, timeUp, done);
  const view = target.machines.length ? new PgStore({ url: target.pg!.url, key: SOAK_KEY }) : null;
  const outageEvery = target.machines.length && opts.outages ? opts.kills / (opts.outages + 1) : Infinity;
  while (!stop()) {
    await sleep(opts.interval[0] + random() * (opts.interval[1] - opts.interval[0]));
    await c.victims[Math.floor(random() * c.victims.length)]!.kill();
    kills++;
    if (view && outages.length < opts.outages && kills >= outageEvery * (outages.length + 1)) {
      const n = outages.length;
      const m = target.machines[n % target.machines.length]!;
      // Over the machines in turn, kill and partition alternating, the next round the other way.
      const round = Math.floor(n / target.machines.length);
      const kind: OutageKind = ((n % target.machines.length) + round) % 2 ? 'partition' : 'kill';
      const procs = c.victims.filter((v) => target.placement.get(v.name) === m);
      const logs = c.owners.filter((o) => procs.includes(o)).map((o) => join(records, `${o.name}.prompts.jsonl`));
      const handedOver = () => logs.reduce((n, f) => n + (statSync(f, { throwIfNoEntry: false })?.size ?? 0), 0);
      outages.push(await outage(kind, m, procs, view, leaseMs(), logs.length ? handedOver : null));
    }
  }
  await view?.close();
  return { kills, outages, pgRestarts: await restarted };
}

/** Killing stops; writers go quiet and read everything; owners deliver the rest; all stop. */
async function drain(target: Target, c: Cast) {
  await Promise.all(c.victims.map((m) => m.line('ready', 60_000)));
  for (const w of c.writers) w.send('quiet');
  await Promise.all(c.writers.map((w) => w.line('quiet', 30_000)));
  await Promise.all(c.writers.map((w) => w.stop('finish', 60_000)));
  await drained(target, DRAIN_TIMEOUT_MS);
  await Promise.all([...c.owners, c.checker].map((m) => m.stop('finish', 30_000)));
}

/** Every process has stopped, so anything still in flight is stuck: one sweep with the liveness
 *  the store gives (PIDs; with leases, the lease snapshot a starting runtime takes), then the
 *  envelopes before and after it. */
async function finalSweep(target: Target) {
  const before = await finalEnvelopes(target);
  const rt = target.open();
  if (target.pg) await rt.start();
  else await rt.run({ op: 'sweep', alive: processAlive });
  await rt.close();
  const after = await finalEnvelopes(target);
  return { envelopes: after.envelopes, inFlightAtEnd: before.inFlight + after.inFlight, fenced: after.fenced };
}

/** What the computer outages measured, beside the lease's promise. */
function outageFigures(outages: Outage[]) {
  // One figure per outage that held mail: its slowest envelope (a batch is swept in one mutation,
  // so per envelope a big batch would outweigh the rest).
  const each = outages.filter((o) => o.sweep_ms.length).map((o) => Math.round(Math.max(...o.sweep_ms)));
  const sorted = [...each].sort((x, y) => x - y);
  return {
    machine_kills: outages.filter((o) => o.kind === 'kill').length,
    partitions: outages.filter((o) => o.kind === 'partition').length,
    outages_holding_mail: outages.filter((o) => o.held > 0).length,
    in_flight_held_at_outage: outages.reduce((n, o) => n + o.held, 0),
    in_flight_not_swept_in_time: outages.reduce((n, o) => n + o.unswept, 0),
    in_flight_back_to_pending_after_last_renewal_ms: {
      each,
      p50: sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)]! : null,
      max: sorted.at(-1) ?? null,
      target_max: leaseMs() + 2_000,
    },
  };
}

async function main() {
  const opts = options(process.argv.slice(2));
  // The workers inherit the environment: these reach every incarnation (worker.ts, lease.ts).
  if (opts.compactBytes !== null) process.env[SOAK_COMPACT_BYTES] = String(opts.compactBytes);
  if (opts.machines) process.env.OPENCOMMS_LEASE_MS = String(SOAK_LEASE_MS);
  if (opts.machines && opts.store !== 'postgres') throw new Error('--machines needs --store postgres');
  if (opts.machines && process.getuid?.() !== 0) throw new Error('--machines builds network namespaces: run as root');
  const started = Date.now();
  const random = rng(opts.seed);
  const base = mkdtempSync(join(tmpdir(), 'opencomms-soak-'));
  const project = join(base, 'project');
  const records = join(base, 'records');
  mkdirSync(project);
  mkdirSync(records);
  const bundle = join(root, 'node_modules', '.cache', 'opencomms-soak', 'worker.mjs');
  await build({
    entryPoints: [join(import.meta.dirname, 'worker.ts')],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'warning',
  });
  const target = await Target.open(project, opts.store, opts.machines);
  try {
    await setUp(target);
    const log = createWriteStream(join(records, 'workers.stderr.log'), { flags: 'a' });
    const c = cast(target, bundle, records, random, log);
    for (const m of [c.checker, ...c.victims]) m.start();
    await Promise.all([c.checker, ...c.victims].map((m) => m.line('ready', 60_000)));
    const run = await killing(target, opts, random, c, records);
    await drain(target, c);
    const end = await finalSweep(target);
    await new Promise((resolve) => log.end(resolve));
    const report = analyse({
      ...end,
      writers: Object.fromEntries(WRITERS.map((w) => [w, readLog<WriterRecord>(join(records, `${w}.jsonl`))])),
      owners: Object.fromEntries(OWNERS.map((o) => [o, readLog<PromptRecord>(join(records, `${o}.prompts.jsonl`))])),
      incarnations: c.lives,
      checks: readLog<CheckRecord>(join(records, 'checker.jsonl')),
      kills: run.kills,
      outages: run.outages,
    });
    writeFileSync(join(records, 'incarnations.json'), JSON.stringify(c.lives, null, 1));
    writeFileSync(join(records, 'outages.json'), JSON.stringify(run.outages, null, 1));
    const failed = verdict(report);
    if (run.kills < opts.kills) failed.push(`kills=${run.kills} < ${opts.kills} within ${opts.maxSeconds} s`);
    if (run.pgRestarts < opts.pgRestarts && target.pg)
      failed.push(`pg_restarts=${run.pgRestarts} < ${opts.pgRestarts}`);
    if (opts.machines && run.outages.length < opts.outages)
      failed.push(`computer outages=${run.outages.length} < ${opts.outages}`);
    print(opts, started, report, failed, records, base, target, run);
  } finally {
    await target.close();
  }
}

function print(
  opts: Options,
  started: number,
  report: Report,
  failed: string[],
  records: string,
  base: string,
  target: Target,
  run: { pgRestarts: number; outages: Outage[] },
) {
  const { examples, ...figures } = report;
  // How often a kill left the file lock behind (the store logs each break): each cost the project
  // up to LOCK_STALE_MS of waiting.
  const staleLocksBroken =
    readFileSync(join(records, 'workers.stderr.log'), 'utf8').split('broke a stale state lock').length - 1;
  const keep = opts.keep || failed.length > 0;
  console.log(
    JSON.stringify({
      soak: 'opencomms',
      store: opts.store,
      ...(target.pg ? { pg_server_user: target.pg.user, pg_restarts: run.pgRestarts } : {}),
      ...(opts.machines ? { machines: opts.machines, lease_ms: leaseMs(), ...outageFigures(run.outages) } : {}),
      seed: opts.seed,
      compact_bytes: opts.compactBytes ?? 'default',
      seconds: Math.round((Date.now() - started) / 1000),
      ...figures,
      ...(target.pg ? {} : { stale_locks_broken: staleLocksBroken }),
      ok: failed.length === 0,
      ...(failed.length ? { failed, examples } : {}),
      ...(keep ? { records: base } : {}),
    }),
  );
  if (!keep) rmSync(base, { recursive: true, force: true });
  process.exitCode = failed.length ? 1 : 0;
}

if (process.argv.includes('--faults')) process.exitCode = (await faults(process.argv.slice(2))) ? 0 : 1;
else await main();
