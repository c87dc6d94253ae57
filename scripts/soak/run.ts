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
//   npm run soak -- --faults      instead: every injected file-system fault of the store's write
//                                 path and every cut of the journal's last line (faults.ts)
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { build } from 'esbuild';
import type { Caller } from '../../src/engine/index.ts';
import type { Envelope } from '../../src/protocol/schema.ts';
import { openRuntime, processAlive } from '../../src/runtime/runtime.ts';
import { analyse, verdict } from './analyse.ts';
import { faults } from './faults.ts';
import { CHANNELS, OWNERS, SOAK_COMPACT_BYTES, WRITERS, rng } from './plan.ts';
import { readLog, type CheckRecord, type Incarnation, type PromptRecord, type WriterRecord } from './records.ts';

const root = join(import.meta.dirname, '..', '..');

interface Options {
  kills: number;
  maxSeconds: number;
  interval: [number, number];
  seed: number;
  keep: boolean;
  compactBytes: number | null;
}

/** The full run: 220 kills at 0.4–2.6 s (mean 1.5 s) is ~5.5 min of killing, leaving room for
 *  start-up and the final drain inside 10 min on 2 shared cores. The short run keeps ≥ 20 kills
 *  within CI's budget. `maxSeconds` bounds the killing phase whatever the machine's speed. */
const FULL = { kills: 220, maxSeconds: 450 };
const SHORT = { kills: 24, maxSeconds: 75 };
/** Writers pause 50–250 ms between actions: ~20 sends/s over two channels stays under the
 *  1000/min rate limit set below, and owners (20 per batch, 1 s cooldown) keep up. */
const WRITER_PACE = '50-250';
/** A host takes up to this long to accept a prompt (OpenCode's promptAsync answers in tens of
 *  ms): the drain→commit window, so that some kills land in it on every run. */
const HOST_LATENCY_MS = 150;
/** How long the final drain may take before the leftovers count as pending. */
const DRAIN_TIMEOUT_MS = 90_000;

function options(argv: string[]): Options {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const base = argv.includes('--short') ? SHORT : FULL;
  const interval = /^(\d+)-(\d+)$/.exec(arg('--interval') ?? '400-2600')!;
  return {
    kills: Number(arg('--kills') ?? base.kills),
    maxSeconds: Number(arg('--max-seconds') ?? base.maxSeconds),
    interval: [Number(interval[1]), Number(interval[2])],
    seed: Number(arg('--seed') ?? Math.floor(Math.random() * 2 ** 31)),
    keep: argv.includes('--keep'),
    compactBytes: arg('--compact-bytes') === undefined ? null : Number(arg('--compact-bytes')),
  };
}

/** One worker role (`w1`, `o1`, the checker) across its incarnations. */
class Managed {
  inc = 0;
  child!: ChildProcess;
  life!: Incarnation;
  exited!: Promise<void>;
  private lines: string[] = [];
  private waiters: Array<() => void> = [];
  /** Set while the harness itself ends this incarnation (a kill or the final stop). */
  private ending = false;
  final = false;

  constructor(
    readonly name: string,
    private readonly argv: (inc: number) => string[],
    private readonly bundle: string,
    private readonly log: NodeJS.WritableStream,
    private readonly lives: Incarnation[],
  ) {}

  start() {
    this.lines = [];
    this.ending = false;
    const child = spawn(process.execPath, [this.bundle, ...this.argv(this.inc)], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    const life: Incarnation = {
      name: this.name,
      inc: this.inc,
      pid: child.pid!,
      started_at: Date.now(),
      ended_at: null,
      killed: false,
      exit: null,
    };
    this.life = life;
    this.lives.push(life);
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        this.lines.push(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        for (const w of this.waiters.splice(0)) w();
      }
    });
    child.stderr!.pipe(this.log, { end: false });
    child.stdin!.on('error', () => {}); // a killed child's pipe
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        life.ended_at = Date.now();
        if (!this.ending) {
          // Nobody asked it to go: a crash. Recorded (the run fails) and restarted.
          life.exit = `${code ?? signal}`;
          if (!this.final) {
            this.inc++;
            this.start();
          }
        }
        resolve();
      }),
    );
  }

  async kill() {
    this.ending = true;
    this.child.kill('SIGKILL');
    await this.exited;
    this.life.killed = true;
    this.inc++;
    this.start();
  }

  send(cmd: string) {
    this.child.stdin!.write(`${cmd}\n`);
  }

  line(want: string, ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.name}#${this.inc}: no "${want}" within ${ms} ms`)), ms);
      const check = () => {
        if (this.lines.includes(want)) {
          clearTimeout(t);
          resolve();
        } else this.waiters.push(check);
      };
      check();
    });
  }

  /** The harness's own end of this incarnation: `cmd`, then wait for it to exit by itself. */
  async stop(cmd: string, ms: number) {
    this.final = true;
    this.ending = true;
    this.send(cmd);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)));
    const how = await Promise.race([this.exited.then(() => 'exited' as const), timeout]);
    clearTimeout(timer);
    if (how === 'timeout') {
      this.life.exit = `did not stop within ${ms} ms`;
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

async function setUp(project: string) {
  const rt = openRuntime(project);
  const caller = (sid: string, mode: 'push' | 'pull'): Caller => ({
    session_id: sid,
    host: 'soak',
    surface: 'cli',
    delivery_mode: mode,
    host_session_id: sid,
    project_id: 'local-project',
    worktree: project,
  });
  const members = [...WRITERS.map((w) => caller(w, 'pull')), ...OWNERS.map((o) => caller(o, 'push'))];
  for (const channel of CHANNELS)
    for (const [i, c] of members.entries()) {
      const role = c.session_id.toUpperCase();
      const r =
        i === 0
          ? await rt.run({
              op: 'create',
              caller: c,
              args: { channel, role, role_prompt: 'soak', rate_limit: 1000, max_hops: 50 },
            })
          : await rt.run({ op: 'join', caller: c, args: { channel, role, role_prompt: 'soak' } });
      if (!r.ok) throw new Error(`set-up: ${c.session_id} on ${channel}: ${r.message}`);
    }
  await rt.close();
}

/** Every envelope the store knows, through its own API: history logs, then live state on top. */
async function finalEnvelopes(project: string): Promise<{ envelopes: Envelope[]; inFlight: number }> {
  const rt = openRuntime(project);
  const state = await rt.read();
  const all = new Map<string, Envelope>();
  for (const ch of Object.values(state.channels))
    for (const e of await rt.store.history(ch.id, Number.MAX_SAFE_INTEGER)) all.set(e.message_id, e);
  for (const e of Object.values(state.messages)) all.set(e.message_id, e);
  await rt.close();
  return {
    envelopes: [...all.values()],
    inFlight: Object.values(state.messages).filter((e) => e.delivery_status === 'in_flight').length,
  };
}

async function drained(project: string, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const rt = openRuntime(project);
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

async function main() {
  const opts = options(process.argv.slice(2));
  // The workers inherit the environment: the size reaches every incarnation (worker.ts).
  if (opts.compactBytes !== null) process.env[SOAK_COMPACT_BYTES] = String(opts.compactBytes);
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
  await setUp(project);

  const lives: Incarnation[] = [];
  const log = createWriteStream(join(records, 'workers.stderr.log'), { flags: 'a' });
  const seedOf = () => String(Math.floor(random() * 2 ** 31));
  const writers = WRITERS.map(
    (w) =>
      new Managed(w, (inc) => ['writer', project, records, w, String(inc), seedOf(), WRITER_PACE], bundle, log, lives),
  );
  const owners = OWNERS.map(
    (o) =>
      new Managed(
        o,
        (inc) => ['owner', project, records, o, String(inc), seedOf(), String(HOST_LATENCY_MS)],
        bundle,
        log,
        lives,
      ),
  );
  const checker = new Managed('checker', () => ['checker', project, records], bundle, log, lives);
  const victims = [...writers, ...owners];
  for (const m of [checker, ...victims]) m.start();
  await Promise.all([checker, ...victims].map((m) => m.line('ready', 60_000)));

  // ---- killing ----------------------------------------------------------------------------------
  let kills = 0;
  const killUntil = Date.now() + opts.maxSeconds * 1000;
  while (kills < opts.kills && Date.now() < killUntil) {
    await sleep(opts.interval[0] + random() * (opts.interval[1] - opts.interval[0]));
    await victims[Math.floor(random() * victims.length)]!.kill();
    kills++;
  }

  // ---- everyone drains ------------------------------------------------------------------------------
  await Promise.all(victims.map((m) => m.line('ready', 60_000)));
  for (const w of writers) w.send('quiet');
  await Promise.all(writers.map((w) => w.line('quiet', 30_000)));
  await Promise.all(writers.map((w) => w.stop('finish', 60_000)));
  await drained(project, DRAIN_TIMEOUT_MS);
  await Promise.all([...owners, checker].map((m) => m.stop('finish', 30_000)));

  // ---- the final sweep: every process has stopped, so anything still in flight is stuck -------------
  const before = await finalEnvelopes(project);
  const rt = openRuntime(project);
  await rt.run({ op: 'sweep', alive: processAlive });
  await rt.close();
  const after = await finalEnvelopes(project);
  await new Promise((resolve) => log.end(resolve));

  const report = analyse({
    envelopes: after.envelopes,
    writers: Object.fromEntries(WRITERS.map((w) => [w, readLog<WriterRecord>(join(records, `${w}.jsonl`))])),
    owners: Object.fromEntries(OWNERS.map((o) => [o, readLog<PromptRecord>(join(records, `${o}.prompts.jsonl`))])),
    incarnations: lives,
    checks: readLog<CheckRecord>(join(records, 'checker.jsonl')),
    kills,
    inFlightAtEnd: before.inFlight + after.inFlight,
  });
  const failed = verdict(report);
  if (kills < opts.kills) failed.push(`kills=${kills} < ${opts.kills} within ${opts.maxSeconds} s`);
  writeFileSync(join(records, 'incarnations.json'), JSON.stringify(lives, null, 1));
  const { examples, ...figures } = report;
  // How often a kill left the lock behind (the store logs each break): each cost the project up
  // to LOCK_STALE_MS of waiting.
  const staleLocksBroken =
    readFileSync(join(records, 'workers.stderr.log'), 'utf8').split('broke a stale state lock').length - 1;
  const keep = opts.keep || failed.length > 0;
  console.log(
    JSON.stringify({
      soak: 'opencomms',
      seed: opts.seed,
      compact_bytes: opts.compactBytes ?? 'default',
      seconds: Math.round((Date.now() - started) / 1000),
      ...figures,
      stale_locks_broken: staleLocksBroken,
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
