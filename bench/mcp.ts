// MCP figures, each divided by the append-only floor server measured in the same run (absolute
// times move 3× between days on shared machines): one send per call in flight, sustained sends,
// a read of 100 messages, start-up, memory, and four writers at once.
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  READER_HOST,
  READ_ANSWER_LIMIT,
  ROOT,
  ceiling,
  mcpNodeFlags,
  bundle,
  connectMcp,
  emit,
  emitRatio,
  message,
  now,
  round,
  spawnToToolsList,
  stats,
  withProject,
  type Mcp,
} from './lib.ts';

const CHANNELS = 12;
/** Channels each server joins; the memory figure rotates over all: 10k sends stay under every channel's 1000 a minute. */
export const RSS_CHANNELS = 40;
const SENDS = 1000;
const WARM = 100;
/** A fresh server's first sends, where V8 is still optimizing: what a new session meets. */
const EARLY = 500;
const SUSTAIN_MS = 3000;
const READS = 15;
export const PIN_A = 'sess_benchaaaaaaaaaaaaaaaaaa';
const PIN_B = 'sess_benchbbbbbbbbbbbbbbbbbb';

/** The server as the installers configure it: node with its flags, the bundle, the project. */
const ours = (dir: string) => [...mcpNodeFlags, join(ROOT, 'dist', 'opencomms-mcp.mjs'), dir];

export async function rssMb(pid: number) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return round(Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024, 1);
}

/** A sender and a reader on the same project: `send(i)` and `read100()` for either server. */
export interface Pair {
  /** One send, to one of `spread` channels in turn, from channel `first` on. */
  send(i: number, spread?: number, first?: number): Promise<void>;
  /** Sends 100 to one place, then times the read of those 100: as many reads as it takes, each
   *  answer within what the reader's host shows of one tool result (READ_ANSWER_LIMIT), and how
   *  many answers that took. */
  read100(round: number): Promise<{ ms: number; answers: number }>;
  /** Whether a reader's pulls go with the sends (OpenComms); the floor has none. */
  reader: boolean;
  /** The reader's pull of its mail every 20 sends (OpenComms); nothing for the floor. */
  housekeep(i: number): Promise<void>;
  /** Empties the reader's queue, untimed (OpenComms); nothing for the floor. */
  drain(): Promise<void>;
  sender: Mcp;
  close(): Promise<void>;
}

/** The floor server's pair. Its read of 100 answers within READ_ANSWER_LIMIT by the pull's count
 *  (floor-server.ts), read again while more waits, as ours; `whole` reads the 100 in one answer
 *  however large (`mcp_pull_100_answer_alone_over_floor`). */
export async function floorPair(
  dir: string,
  floorJs: string,
  mode: '' | '--framed' | '--pg' = '',
  env: Record<string, string> = {},
  whole = false,
): Promise<Pair> {
  const s = await connectMcp([floorJs, dir, ...(mode ? [mode] : [])], env);
  return {
    sender: s,
    send: async (i, spread = CHANNELS, first = 0) => {
      const r = await s.call('send', { channel: `m${first + (i % spread)}`, content: message(i) });
      if (!r.ok) throw new Error(r.message);
    },
    read100: async (k) => {
      const sent: string[] = [];
      for (let i = 0; i < 100; i++)
        sent.push(...(await s.call('send', { channel: `solo${k % 2}`, content: message(i) })).data.message_ids);
      const got: Array<{ id?: string; message_id?: string }> = [];
      let answers = 0;
      const t = now();
      for (;;) {
        const r = await s.call('read', whole ? { limit: 100 } : { limit: 100, max_size: READ_ANSWER_LIMIT });
        answers++;
        got.push(...r.data.messages);
        if (!r.data.more_than_fits || !r.data.messages.length) break;
      }
      const ms = now() - t;
      // The plain floor answers the ids its sends returned; a framed answer its own, in send order.
      const ids = got.map((m) => m.id ?? m.message_id!);
      if (
        ids.length !== 100 ||
        (mode === '' ? ids.join() !== sent.join() : ids.some((id, i) => i && id <= ids[i - 1]!))
      )
        throw new Error(`floor read ${ids.length} of the 100 sent, or out of order`);
      return { ms, answers };
    },
    reader: false,
    housekeep: async () => {},
    drain: async () => {},
    close: () => s.close(),
  };
}

/** Our pair: the sender as the installers configure it, the reader as the same server in the host
 *  READER_HOST (`--host`), whose pulls answer within its tool result. */
export async function oursPair(dir: string, env: Record<string, string> = {}): Promise<Pair> {
  const a = await connectMcp(ours(dir), { OPENCOMMS_MEMBER_ID: PIN_A, ...env });
  const b = await connectMcp([...ours(dir), '--host', READER_HOST], { OPENCOMMS_MEMBER_ID: PIN_B, ...env });
  for (const name of [...Array.from({ length: RSS_CHANNELS }, (_, i) => `m${i}`), 'solo0', 'solo1']) {
    await a.call('opencomms_create', { channel: name, role: 'A', role_prompt: 'send', rate_limit: 1000 });
    await b.call('opencomms_join', { channel: name, role: 'B', role_prompt: 'read' });
  }
  return {
    sender: a,
    reader: true,
    send: async (i, spread = CHANNELS, first = 0) => {
      const r = await a.call('opencomms_send', { channel: `m${first + (i % spread)}`, content: message(i) });
      if (!r.ok) throw new Error(r.message);
    },
    read100: async (k) => {
      const channel = `solo${k % 2}`; // two channels in turn: each stays under its rate limit
      const sent: string[] = [];
      for (let i = 0; i < 100; i++) {
        const r = await a.call('opencomms_send', { channel, content: `${message(i)} ${k}` });
        if (!r.ok) throw new Error(r.message);
        sent.push(...r.data.message_ids);
      }
      // As a host's model reads: pull, and pull again while the answer says more waits.
      const got: string[] = [];
      let answers = 0;
      const t = now();
      for (;;) {
        const r = await b.call('opencomms_pull', { channel, limit: 100 });
        if (!r.ok) throw new Error(r.message);
        answers++;
        got.push(...r.data.message_ids);
        if (!(r.data.more_than_fits || r.data.remaining > 0) || !r.data.messages.length) break;
      }
      const ms = now() - t;
      if (got.join() !== sent.join())
        throw new Error(`read ${got.length} in ${answers} pull(s), not the 100 sent in their order`);
      return { ms, answers };
    },
    housekeep: async (i) => {
      if (i % 20 === 19) await b.call('opencomms_pull', { limit: 100 });
    },
    drain: async () => {
      while ((await b.call('opencomms_pull', { limit: 100 })).data.remaining > 0);
    },
    close: async () => {
      await a.close();
      await b.close();
    },
  };
}

interface Figures {
  send: ReturnType<typeof stats>;
  early: ReturnType<typeof stats> & { mean: number };
  /** Sends per second, one in flight, nothing else in the loop. */
  sustained: number;
  /** OpenComms: the same with its reader pulling every 20 sends (`housekeep`); null for the floor. */
  withReader: number | null;
  read: ReturnType<typeof stats>;
  /** Answers each read of 100 took, fewest–most. */
  answers: string;
}

/** Sends per second over SUSTAIN_MS, from send `i` on, each followed by `after(i)`; to the
 *  CHANNELS channels from `first` on (each window its own, so that no channel nears its rate limit
 *  of 1000 a minute). */
async function sustain(p: Pair, i: number, first: number, after: (i: number) => Promise<void>) {
  const start = i;
  const t = now();
  while (now() - t < SUSTAIN_MS) {
    await p.send(i, CHANNELS, first);
    await after(i++);
  }
  return { rate: (i - start) / ((now() - t) / 1000), next: i };
}

/** The same sequence for both servers: timed sends, sustained sends, reads of 100; for OpenComms
 *  also sustained sends with its reader pulling. The send loops carry nothing else, as the
 *  floor's: the queue they leave the reader is drained, untimed, before the reader's own figures
 *  (a send's cost does not grow with the recipient's backlog: `engine_send_backlog_10k_over_empty`). */
async function measure(p: Pair): Promise<Figures> {
  const rt: number[] = [];
  let i = 0;
  for (; i < WARM + SENDS; i++) {
    const t = now();
    await p.send(i);
    rt.push(now() - t);
  }
  const early = rt.slice(0, EARLY);
  const sendsOnly = await sustain(p, i, 0, async () => {});
  await p.drain();
  const withReader = p.reader ? await sustain(p, sendsOnly.next, CHANNELS, (k) => p.housekeep(k)) : null;
  await p.drain();
  const reads: Array<{ ms: number; answers: number }> = [];
  for (let k = 0; k < READS; k++) reads.push(await p.read100(k));
  return {
    send: stats(rt.slice(WARM)),
    early: { ...stats(early), mean: round(early.reduce((a, b) => a + b, 0) / EARLY, 3) },
    sustained: sendsOnly.rate,
    withReader: withReader?.rate ?? null,
    read: stats(reads.map((r) => r.ms)),
    answers: span(reads.map((r) => r.answers)),
  };
}

/** Fewest–most of `xs`, or the one value. */
export function span(xs: number[]) {
  const [lo, hi] = [Math.min(...xs), Math.max(...xs)];
  return lo === hi ? String(lo) : `${lo}–${hi}`;
}

/** The floor's read of 100 as it is, and answering what a pull of 100 answers (the same frames,
 *  built by our framing module, in the same shape): the cost of the answer with no store behind
 *  it, each read in one answer however large (no route limit). Reads alternate between the two,
 *  so drift falls on both. */
async function answerAlone(dir: string, floorJs: string) {
  const plain = await floorPair(dir, floorJs, '', {}, true);
  const framed = await floorPair(dir, floorJs, '--framed', {}, true);
  const a: number[] = [];
  const b: number[] = [];
  for (let k = 0; k < 2 * READS; k++) {
    a.push((await plain.read100(k)).ms);
    b.push((await framed.read100(k)).ms);
  }
  const r = await framed.sender.call('read', { limit: 100 });
  await plain.close();
  await framed.close();
  return { plain: stats(a).p50, framed: stats(b).p50, chars: JSON.stringify(r).length };
}

/** Busy and total jiffies of the whole machine (the bench is the only load on it). */
async function machineCpu() {
  const f = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - f[3]! - f[4]!, total };
}

/** One sender per process, `writers` at once, each with its own server (ours, or the floor server
 *  `floorJs`, started with `floorMode` and `env`) on one project, or (`unshared`) each on a project
 *  of its own under `dir`, made ready by `prepare` (a binding to a store of its own): the aggregate
 *  rate, the cores the machine kept busy meanwhile, and its CPU time per send. */
export async function writers(
  dir: string,
  count: number,
  perWriter: number,
  o: {
    floorJs?: string;
    floorMode?: '--pg';
    env?: Record<string, string>;
    unshared?: boolean;
    prepare?: (project: string) => Promise<unknown>;
  } = {},
): Promise<{ rate: number; cores: number; cpuMsPerSend: number; send: ReturnType<typeof stats> }> {
  const kind = `${count}${o.floorJs ? '-floor' : ''}${o.unshared ? '-apart' : ''}`;
  const barrier = join(dir, `go-${kind}`);
  const project = (w: number) => (o.unshared ? join(dir, `apart-${kind}-${w}`) : dir);
  // A project folder of its own must exist: the MCP server refuses a missing one before it starts.
  if (o.unshared)
    for (let w = 0; w < count; w++) {
      await mkdir(project(w), { recursive: true });
      await o.prepare?.(project(w));
    }
  const kids = Array.from({ length: count }, (_, w) =>
    spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(import.meta.dirname, 'mcp-writer.ts'),
        project(w),
        `w${count}x${w}`,
        String(perWriter),
        barrier,
        ...(o.floorJs ? [o.floorJs, ...(o.floorMode ? [o.floorMode] : [])] : []),
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, ...o.env },
      },
    ),
  );
  const lines = kids.map((k) => {
    let out = '';
    k.stdout.on('data', (d: Buffer) => (out += d.toString()));
    return () => out;
  });
  const waitLine = (i: number, re: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const t = setInterval(() => {
        const m = lines[i]!()
          .split('\n')
          .find((l) => re.test(l));
        if (m) {
          clearInterval(t);
          resolve(m);
        }
      }, 5);
      kids[i]!.on('exit', (code) => {
        if (!re.test(lines[i]!())) reject(new Error(`writer exited ${code}`));
      });
    });
  await Promise.all(kids.map((_, i) => waitLine(i, /^ready/)));
  const cpu0 = await machineCpu();
  const t = now();
  await writeFile(barrier, '');
  const done = await Promise.all(kids.map((_, i) => waitLine(i, /^\{/)));
  const elapsed = (now() - t) / 1000;
  const cpu1 = await machineCpu();
  const results = done.map((l) => JSON.parse(l) as { sent: number; ms: number[] });
  const sent = results.reduce((a, r) => a + r.sent, 0);
  const cores = (availableParallelism() * (cpu1.busy - cpu0.busy)) / (cpu1.total - cpu0.total);
  return {
    rate: sent / elapsed,
    cores: round(cores),
    cpuMsPerSend: round((cores * elapsed * 1000) / sent, 3),
    send: stats(results.flatMap((r) => r.ms)),
  };
}

/** CPU time of a process so far (user + system), from /proc. */
async function cpuMs(pid: number) {
  const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * (1000 / CLOCK_TICKS);
}
/** Linux's USER_HZ, what /proc/<pid>/stat counts CPU time in. */
const CLOCK_TICKS = 100;
const IDLE_SENDS = 2000;

/** One server sends IDLE_SENDS while three others of the project wait for calls, after all four
 *  contended for the lock once (as sessions sending at the same moment do): the writer's time per
 *  send and the CPU the waiting servers spent meanwhile (their catch-ups while they wait included). */
async function idleBeside(dir: string) {
  const pin = (k: number) => `sess_bench${String.fromCharCode(97 + k).repeat(18)}`;
  const servers = await Promise.all([0, 1, 2, 3].map((k) => connectMcp(ours(dir), { OPENCOMMS_MEMBER_ID: pin(k) })));
  const [writer, ...idle] = servers as [Mcp, ...Mcp[]];
  for (let c = 0; c < 4; c++) {
    await writer.call('opencomms_create', { channel: `out${c}`, role: 'A', role_prompt: 'send', rate_limit: 1000 });
    for (const s of idle)
      await s.call('opencomms_join', { channel: `out${c}`, role: `B${servers.indexOf(s)}`, role_prompt: 'read' });
  }
  await Promise.all(
    servers.map(async (s, k) => {
      for (let i = 0; i < 30; i++) {
        const r = await s.call('opencomms_send', {
          channel: `out${k}`,
          content: `${message(i)} ${k}`,
          broadcast: true,
        });
        if (!r.ok) throw new Error(`contention send refused: ${r.message}`);
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 1500)); // past the quiet second of the servers' catch-ups
  const before = await Promise.all(idle.map((s) => cpuMs(s.pid)));
  const rt: number[] = [];
  for (let i = 0; i < IDLE_SENDS; i++) {
    const t = now();
    const r = await writer.call('opencomms_send', { channel: `out${i % 4}`, content: message(i), broadcast: true });
    rt.push(now() - t);
    if (!r.ok) throw new Error(r.message);
  }
  const after = await Promise.all(idle.map((s) => cpuMs(s.pid)));
  for (const s of servers) await s.close();
  return {
    writer_send_p50: stats(rt).p50,
    idle_servers_cpu_per_1000_sends: round(
      after.reduce((a, x, i) => a + x - before[i]!, 0) / idle.length / (IDLE_SENDS / 1000),
      1,
    ),
    what: `one server's ${IDLE_SENDS} sends (broadcasts to three others' sessions) while their servers wait; CPU per waiting server`,
  };
}

export async function mcpBench() {
  await withProject(async (tmp) => {
    const floorJs = join(tmp, 'floor-server.mjs');
    await bundle(join(import.meta.dirname, 'floor-server.ts'), floorJs);

    const floor = await withProject(async (dir) => {
      const p = await floorPair(dir, floorJs);
      const f = await measure(p);
      await p.close();
      return f;
    });
    const mine = await withProject(async (dir) => {
      const p = await oursPair(dir);
      const f = await measure(p);
      // Memory: after 10k sends in all, and how much it grew from the first thousand on.
      const pid = p.sender.pid;
      let i = 100_000;
      while (i < 101_000) {
        await p.send(i, RSS_CHANNELS);
        await p.housekeep(i++);
      }
      const at1k = await rssMb(pid);
      while (i < 110_000) {
        await p.send(i, RSS_CHANNELS);
        await p.housekeep(i++);
      }
      emit('mcp_server_rss_after_10k_sends', {
        unit: 'MB',
        value: await rssMb(pid),
        after_1k: at1k,
        target: '<= 80, not growing with history',
        node_flags: mcpNodeFlags.join(' '),
      });
      await p.close();
      return f;
    });
    emit('mcp_send_roundtrip', { unit: 'ms', ...mine.send, floor: floor.send });
    emitRatio('mcp_send_p50_over_floor', mine.send.p50, floor.send.p50, '<= 2 (best peer 2.65)');
    emit('mcp_send_first_500', {
      unit: 'ms',
      ...mine.early,
      floor: floor.early,
      note: "a fresh server's first sends, warm-up included",
    });
    emitRatio('mcp_sustained_over_floor', mine.sustained, floor.sustained, '>= 0.3 (best peer 0.18)', {
      unit: 'sends/s',
      loop: 'sends only, one in flight',
    });
    if (mine.withReader !== null)
      emitRatio(
        'mcp_sustained_with_reader_over_floor',
        mine.withReader,
        floor.sustained,
        'reported: the figure through the seventh session',
        {
          unit: 'sends/s',
          loop: "ours: sends with its reader's pull every 20 sends; the floor: sends only (it has no reader)",
        },
      );
    const read = {
      host: READER_HOST,
      answer_limit: READ_ANSWER_LIMIT,
      answers: { pull: mine.answers, floor: floor.answers },
    };
    emit('mcp_pull_100', { unit: 'ms', ...mine.read, floor_read_100: floor.read, ...read });
    emitRatio(
      'mcp_pull_100_p50_over_floor',
      mine.read.p50,
      floor.read.p50,
      'reported (retired target <= 2: the framed answer alone is ~2x)',
      {
        unit: 'ms',
        what: "the whole read of 100: ours as many pulls as the host's tool result takes; the floor's plain read by the same bound and count",
        ...read,
      },
    );
    const answer = await withProject((dir) => answerAlone(dir, floorJs));
    emitRatio(
      'mcp_pull_100_answer_alone_over_floor',
      answer.framed,
      answer.plain,
      'reported: the part of the pull target (<= 2) its answer alone takes',
      {
        unit: 'ms',
        what: "the floor's read of 100 answering with the frames and the shape of opencomms_pull (docs/protocol.md, Framing), reads alternating with the plain floor's",
        answer_chars: answer.chars,
      },
    );

    const durable = await withProject(async (dir) => {
      const p = await oursPair(dir, { OPENCOMMS_DURABILITY: 'durable' });
      const f = await measure(p);
      await p.close();
      return f;
    });
    emit('mcp_send_roundtrip_durable', {
      unit: 'ms',
      ...durable.send,
      sustained: round(durable.sustained),
      note: 'OPENCOMMS_DURABILITY=durable: every write fsynced',
    });

    // Start-up: spawn → tools/list answered, alternating so that load hits both alike.
    const SPAWNS = 10;
    const minimal: number[] = [];
    const bundled: number[] = [];
    const viaBin: number[] = [];
    await withProject(async (dir) => {
      const env = { OPENCOMMS_MEMBER_ID: PIN_A };
      for (let k = 0; k < SPAWNS; k++) {
        minimal.push(await spawnToToolsList([join(import.meta.dirname, 'minimal-server.mjs')]));
        bundled.push(await spawnToToolsList(ours(dir), env));
        viaBin.push(await spawnToToolsList([join(ROOT, 'bin', 'opencomms.js'), 'mcp', '--project', dir], env));
      }
    });
    const m = stats(minimal).p50;
    emitRatio('mcp_spawn_to_tools_list_over_minimal_sdk_server', stats(bundled).p50, m, '<= 1.0', {
      unit: 'ms',
      command: 'node .opencomms/opencomms-mcp.mjs <project> (what the installers configure)',
    });
    emitRatio('mcp_spawn_to_tools_list_via_bin_over_minimal_sdk_server', stats(viaBin).p50, m, '<= 1.0', {
      unit: 'ms',
      command: 'node bin/opencomms.js mcp --project <dir>',
    });

    // Other servers of the project while one writes: what they cost the writer and the machine.
    await withProject(async (dir) =>
      emit('mcp_idle_servers_beside_a_writer', { unit: 'ms', ...(await idleBeside(dir)) }),
    );

    // Four writers at once against one: each writer is its own process with its own server.
    // Beside it, what four reach sharing nothing: ours on four projects of their own (`unshared`),
    // and the floor's writers (`floor_4_over_1`), whose send is one append.
    await withProject(async (dir) => {
      const one = await writers(dir, 1, 600);
      const four = await writers(dir, 4, 600);
      const fourApart = await writers(dir, 4, 600, { unshared: true });
      const floorOne = await writers(dir, 1, 600, { floorJs });
      const floorFour = await writers(dir, 4, 600, { floorJs });
      emitRatio('mcp_4_writers_over_1', four.rate, one.rate, 'reported (retired target >= 1.5: beyond 2 cores)', {
        unit: 'sends/s aggregate',
        cores_busy: { one: one.cores, four: four.cores },
        cpu_ms_per_send: { one: one.cpuMsPerSend, four: four.cpuMsPerSend },
        ceiling: ceiling(one.cores),
        unshared: round(fourApart.rate / one.rate),
        floor_4_over_1: round(floorFour.rate / floorOne.rate),
      });
    });
  });
}
