// Fault injection for the store's write path, the way SQLite tests every I/O error: every call an
// operation makes through the store's file-system seam (src/store/file/fs.ts) is recorded; then the
// operation is run again once per call position and fault, with that call made to fail, and the
// invariants are checked after the fault is removed. Used by test/store/faults.test.ts (bounded,
// seeded) and `npm run soak -- --faults` (every point, more scenarios).
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { storeFs, type StoreFs } from '../../src/store/file/fs.ts';
import { resolvePaths } from '../../src/store/paths.ts';
import { CHANNEL, live, pair, proc, pull, send, type Proc } from './mail.ts';

export type Op = keyof StoreFs;
export interface Call {
  op: Op;
  path: string;
}

/** What a fault does to the call it hits. `full`: the write takes half its bytes and every later
 *  write of the operation fails with ENOSPC (a disk that fills up mid-write). */
export type Fault = 'short' | 'full' | 'ENOSPC' | 'EIO' | 'EROFS' | 'fsync' | 'rename';

const WRITES: Op[] = ['writeSync'];
const CREATES: Op[] = ['openSync', 'mkdirSync', 'renameSync', 'unlinkSync', 'ftruncateSync'];
/** Which faults a call can meet. */
export function faultsFor(op: Op): Fault[] {
  if (WRITES.includes(op)) return ['short', 'full', 'ENOSPC', 'EIO', 'EROFS'];
  if (op === 'fsyncSync') return ['fsync'];
  if (op === 'renameSync') return ['rename', 'ENOSPC', 'EROFS'];
  if (CREATES.includes(op)) return ['ENOSPC', 'EIO', 'EROFS'];
  return ['EIO']; // reads, stats, closes
}

const errno = (code: string, op: string) => Object.assign(new Error(`${code}: injected, ${op}`), { code });

/** Runs `fn` with every seam call recorded; with `fault`, the call at `at` (0-based) fails. */
export async function withSeam<T>(
  fn: () => Promise<T>,
  fault?: { at: number; kind: Fault },
): Promise<{ value: T; calls: Call[] }> {
  const real = { ...storeFs };
  const calls: Call[] = [];
  const fds = new Map<number, string>();
  let full = false;
  const pathOf = (op: Op, args: unknown[]) =>
    typeof args[0] === 'number' && op !== 'mkdirSync' ? (fds.get(args[0]) ?? `fd ${args[0]}`) : String(args[0]);
  for (const op of Object.keys(real) as Op[]) {
    (storeFs as Record<Op, unknown>)[op] = (...args: unknown[]) => {
      const i = calls.length;
      calls.push({ op, path: pathOf(op, args) });
      if (full && (op === 'writeSync' || op === 'fsyncSync')) throw errno('ENOSPC', op);
      if (fault && i === fault.at) {
        if (fault.kind === 'short' || fault.kind === 'full') {
          const [fd, buf, off = 0, len = (buf as Uint8Array).length - off] = args as [
            number,
            Uint8Array,
            number?,
            number?,
          ];
          const half = Math.max(1, Math.floor((len as number) / 2));
          full = fault.kind === 'full';
          return real.writeSync(fd, buf, off, Math.min(half, len as number));
        }
        throw errno(fault.kind === 'fsync' || fault.kind === 'rename' ? 'EIO' : fault.kind, op);
      }
      const out = (real[op] as (...a: unknown[]) => unknown)(...args);
      if (op === 'openSync') fds.set(out as number, String(args[0]));
      return out;
    };
  }
  try {
    return { value: await fn(), calls };
  } finally {
    Object.assign(storeFs, real);
  }
}

/** A project to break: a template copied for every run (the lock's own files left out). */
export class Bench {
  readonly root = mkdtempSync(join(tmpdir(), 'opencomms-faults-'));
  private n = 0;
  private readonly procs: Proc[] = [];

  /** A fresh directory holding a copy of `template`. */
  copy(template: string): string {
    const dir = join(this.root, `run${this.n++}`);
    cpSync(template, dir, { recursive: true, filter: (src) => !/[/\\]\.state[.-]lock/.test(src) });
    return dir;
  }

  open(dir: string, options?: Parameters<typeof proc>[1]): Proc {
    const p = proc(dir, options);
    this.procs.push(p);
    return p;
  }

  async closeAll(): Promise<void> {
    for (const p of this.procs.splice(0)) await p.close();
  }

  async dispose(): Promise<void> {
    await this.closeAll();
    rmSync(this.root, { recursive: true, force: true });
  }

  /** A template: A and B on one channel, with `pending` sent and not pulled. */
  async template(pending: string[], setup?: (p: Proc, dir: string) => Promise<void>): Promise<string> {
    const dir = join(this.root, `template${this.n++}`);
    const p = this.open(dir);
    await pair(p);
    for (const m of pending) if (!(await send(p, m)).ok) throw new Error(`template: send ${m} refused`);
    await setup?.(p, dir);
    await this.closeAll();
    return dir;
  }
}

/** What a scenario's operation did, for the invariants. */
export interface Outcome {
  ok: boolean;
  /** Contents answered as sent by this operation, in order. */
  sent: string[];
  /** Contents answered as pulled by this operation, in order. */
  pulled: string[];
}

export interface Scenario {
  name: string;
  /** Contents pending in the template, oldest first. */
  pending: string[];
  setup?: (p: Proc, dir: string) => Promise<void>;
  options?: Parameters<typeof proc>[1];
  /** The operation's process loads the project inside the operation (a recovery happens there),
   *  not before it. */
  cold?: boolean;
  /** Only `check` applies (the operation is meant to lose live state, as a corrupt file does). */
  own?: boolean;
  /** The operation, run by `p` (a process that loaded the project before the fault). */
  run(p: Proc, dir: string): Promise<Outcome>;
  /** Extra checks after the fault is removed (e.g. what an archive must hold). */
  check?(dir: string, out: Outcome): Promise<string | null>;
}

const sendOne =
  (content: string) =>
  async (p: Proc): Promise<Outcome> => {
    const r = await send(p, content);
    return { ok: r.ok, sent: r.ok ? [content] : [], pulled: [] };
  };

const pullAll = async (p: Proc): Promise<Outcome> => {
  const { result, contents } = await pull(p);
  return { ok: result.ok, sent: [], pulled: result.ok ? contents : [] };
};

/** The operations of the write path: a send (one journal line), a pull (history logs and a
 *  line), a compaction (a send that writes a snapshot and seals the journal), the recovery of a
 *  damaged journal and of a corrupt state.json (each under the send that finds it), and a save
 *  (an archive, history and the state). */
export const SCENARIOS: Scenario[] = [
  { name: 'send', pending: ['one', 'two'], run: sendOne('three') },
  { name: 'pull', pending: ['one', 'two'], run: pullAll },
  { name: 'compaction', pending: ['one', 'two'], options: { compactBytes: 0 }, run: sendOne('three') },
  {
    name: 'journal recovery',
    pending: ['one', 'two'],
    setup: async (_p, dir) => {
      const paths = resolvePaths(dir);
      const id = (JSON.parse(readFileSync(paths.state, 'utf8')) as { journal_id: string }).journal_id;
      const file = join(paths.journal, `${id}.jsonl`);
      const text = readFileSync(file, 'utf8');
      writeFileSync(file, `${text}{"n":99,"ops":[]}\n`);
    },
    cold: true,
    run: sendOne('three'),
  },
  {
    name: 'state recovery',
    pending: ['one', 'two'],
    setup: async (_p, dir) => writeFileSync(resolvePaths(dir).state, '{"schema_version": 2, "channels": '),
    cold: true,
    own: true,
    run: sendOne('three'),
    check: async (dir) => {
      const paths = resolvePaths(dir);
      const corrupt = '{"schema_version": 2, "channels": ';
      const kept = [
        paths.state,
        ...readdirSync(paths.dir)
          .filter((n) => n.startsWith('state.corrupt.'))
          .map((n) => join(paths.dir, n)),
      ];
      if (!kept.some((f) => readFileSync(f, 'utf8') === corrupt))
        return 'the corrupt state.json was neither left in place nor copied aside';
      const journals = readdirSync(paths.journal);
      if (journals.length === 0) return 'the journal of the corrupt snapshot is gone';
      const fresh = proc(dir);
      try {
        await fresh.store.read();
        return null;
      } catch (e) {
        return `the project does not load after the fault: ${(e as Error).message}`;
      } finally {
        await fresh.close();
      }
    },
  },
  {
    name: 'archive',
    pending: ['one', 'two'],
    run: async (p) => {
      const r = await p.rt.run({
        op: 'save_session',
        actor: { sid: 'a', project_id: 'local-project', worktree: '/w' },
        args: { channel: CHANNEL },
      });
      return { ok: r.ok, sent: [], pulled: [] };
    },
    check: async (dir, out) => {
      const folder = resolvePaths(dir).archives;
      const archives = existsSync(folder)
        ? readdirSync(folder).filter((n) => n.endsWith('.json') && !n.startsWith('.'))
        : []; // .index.json is the heads index
      const fresh = proc(dir);
      try {
        if (out.ok && archives.length !== 1) return `save answered ok, ${archives.length} archives`;
        if (!out.ok && archives.length !== 0) return `save refused, yet ${archives.length} archive file(s)`;
        if (!out.ok && (await live(fresh)).join() !== 'one,two')
          return 'save refused, yet the messages left live state';
        return null;
      } finally {
        await fresh.close();
      }
    },
  },
];

/** Checks the invariants after an operation ran (and its fault was removed): the project loads;
 *  every content answered sent is delivered exactly once and in order, every content a refused
 *  send carried never; a pull answered ok took its messages out of live state and into history,
 *  a refused one left them live and the history without them; the process that met the fault
 *  works on. Returns what is wrong, or null. */
export async function checkInvariants(
  bench: Bench,
  dir: string,
  s: Scenario,
  out: Outcome,
  faulty: Proc,
): Promise<string | null> {
  const extra = await s.check?.(dir, out);
  if (extra) return extra;
  if (s.own || s.name === 'archive') return null; // its messages left with the archive when it was saved
  // The faulty process goes on: one more send through it must work and be seen by everyone.
  const after = await send(faulty, 'after');
  if (!after.ok) return `the process that met the fault cannot send after it (${after.message})`;
  const fresh = bench.open(dir);
  const expected = [...s.pending.filter((m) => !out.pulled.includes(m)), ...out.sent, 'after'];
  const drained: string[] = [];
  for (;;) {
    const { result, contents } = await pull(fresh);
    if (!result.ok) return `pull after the fault refused: ${result.message}`;
    if (!contents.length) break;
    drained.push(...contents);
  }
  if (drained.join('\n') !== expected.join('\n'))
    return `delivered ${JSON.stringify(drained)}, expected ${JSON.stringify(expected)} (answered: ${JSON.stringify(out)})`;
  // History, line by line: every message is there once now that all were pulled (a refused
  // pull's lines were taken back, or the second pull would have written them twice).
  const folder = resolvePaths(dir).history;
  const file = join(folder, readdirSync(folder).find((n) => n.endsWith('.jsonl'))!);
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { content: string }).content);
  for (const m of expected) {
    const n = lines.filter((h) => h === m).length;
    if (n !== 1) return `"${m}" is ${n} times in the history log after everything was pulled`;
  }
  return null;
}

/** Every fault point of a scenario: the recorded calls of a clean run, each with each fault. */
export async function faultPoints(
  bench: Bench,
  s: Scenario,
  template: string,
): Promise<Array<{ at: number; kind: Fault; call: Call }>> {
  const dir = bench.copy(template);
  const p = bench.open(dir, s.options);
  if (!s.cold) await p.store.read(); // loaded before the operation, as a running server is
  const { calls } = await withSeam(() => s.run(p, dir));
  await bench.closeAll();
  return calls.flatMap((call, at) => faultsFor(call.op).map((kind) => ({ at, kind, call })));
}

/** Runs one fault point; returns what is wrong, or null. */
export async function runPoint(
  bench: Bench,
  s: Scenario,
  template: string,
  point: { at: number; kind: Fault },
): Promise<string | null> {
  const dir = bench.copy(template);
  try {
    const p = bench.open(dir, s.options);
    if (!s.cold) await p.store.read();
    const { value } = await withSeam(
      () => s.run(p, dir).catch((e: unknown) => ({ ok: false, sent: [], pulled: [], error: e }) as Outcome),
      point,
    );
    return await checkInvariants(bench, dir, s, value, p);
  } finally {
    await bench.closeAll();
  }
}

/** The journal of a project, cut at `at` bytes. */
export function cutJournal(dir: string, at: number): void {
  const paths = resolvePaths(dir);
  const id = (JSON.parse(readFileSync(paths.state, 'utf8')) as { journal_id: string }).journal_id;
  truncateSync(join(paths.journal, `${id}.jsonl`), at);
}

/** The byte range of the journal's last line: [start, end). */
export function lastLine(dir: string): { start: number; end: number } {
  const paths = resolvePaths(dir);
  const id = (JSON.parse(readFileSync(paths.state, 'utf8')) as { journal_id: string }).journal_id;
  const file = join(paths.journal, `${id}.jsonl`);
  const text = readFileSync(file);
  const end = statSync(file).size;
  const start = text.lastIndexOf(10, end - 2) + 1;
  return { start, end };
}

/** Cuts the journal at `at` while A and B hold its old length, then a fresh process sends
 *  "four" and A "five": B must get both, once each, and the two that were not cut. */
export async function runCut(bench: Bench, template: string, at: number): Promise<string | null> {
  const dir = bench.copy(template);
  try {
    const a = bench.open(dir);
    const b = bench.open(dir);
    await a.store.read();
    await b.store.read();
    cutJournal(dir, at);
    const four = await send(bench.open(dir), 'four');
    const five = await send(a, 'five');
    if (!four.ok || !five.ok) return `sends after the cut refused: ${four.message} / ${five.message}`;
    const got: string[] = [];
    for (;;) {
      const { result, contents } = await pull(b);
      if (!result.ok) return `pull refused: ${result.message}`;
      if (!contents.length) break;
      got.push(...contents);
    }
    const want = ['one', 'two', 'four', 'five'];
    const rest = got.filter((m) => m !== 'three');
    if (rest.join() !== want.join()) return `cut at ${at}: B got ${JSON.stringify(got)}`;
    return null;
  } finally {
    await bench.closeAll();
  }
}

/** A seeded choice of `n` of `items` (all of them when n ≥ their number), in order. */
export function sample<T>(items: T[], n: number, seed: number): T[] {
  if (n >= items.length) return items;
  let x = seed >>> 0 || 1;
  const rand = () => {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    return x / 2 ** 32;
  };
  const idx = new Set<number>();
  while (idx.size < n) idx.add(Math.floor(rand() * items.length));
  return [...idx].sort((p, q) => p - q).map((i) => items[i]!);
}
