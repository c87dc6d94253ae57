// Crash states beyond kill -9, after the ALICE study (Pillai et al., OSDI 2014): the file-system
// operations an operation issues through the store's seam (src/store/file/fs.ts) are recorded, and
// every state a POSIX file system may leave at a power loss is built and loaded. A state is a
// prefix of the operations with any of them that no fsync forced yet lost (in any combination:
// POSIX orders nothing without fsync), and the last write kept torn. A kill -9 loses nothing the
// kernel took: its states are the prefixes themselves.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { storeFs } from '../../src/store/file/fs.ts';
import { resolvePaths } from '../../src/store/paths.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { sample, type Bench } from './faults.ts';
import { live, pull, send, type Proc } from './mail.ts';

export type FsOp =
  | { kind: 'create'; path: string }
  | { kind: 'write'; path: string; at: number; bytes: Buffer }
  | { kind: 'truncate'; path: string; size: number }
  | { kind: 'rename'; from: string; to: string }
  | { kind: 'unlink'; path: string }
  | { kind: 'mkdir'; path: string }
  | { kind: 'fsync'; path: string };

/** Runs `fn` with the file system's changes recorded (paths relative to `root`). */
export async function recordOps<T>(root: string, fn: () => Promise<T>): Promise<{ value: T; ops: FsOp[] }> {
  const real = { ...storeFs };
  const ops: FsOp[] = [];
  const fds = new Map<number, string>();
  const rel = (p: string) => relative(root, p);
  storeFs.openSync = ((path: string, flags: string, mode?: number) => {
    const created = /[wax+]/.test(String(flags)) && String(flags) !== 'r' && !existsSync(path);
    const fd = real.openSync(path, flags, mode);
    if (created) ops.push({ kind: 'create', path: rel(path) });
    fds.set(fd, rel(path));
    return fd;
  }) as typeof storeFs.openSync;
  storeFs.writeSync = ((fd: number, buf: Uint8Array, off?: number, len?: number) => {
    const n = real.writeSync(fd, buf, off, len);
    const size = real.fstatSync(fd).size;
    const start = off ?? 0;
    ops.push({ kind: 'write', path: fds.get(fd)!, at: size - n, bytes: Buffer.from(buf.subarray(start, start + n)) });
    return n;
  }) as typeof storeFs.writeSync;
  storeFs.ftruncateSync = ((fd: number, len?: number) => {
    real.ftruncateSync(fd, len);
    ops.push({ kind: 'truncate', path: fds.get(fd)!, size: len ?? 0 });
  }) as typeof storeFs.ftruncateSync;
  storeFs.renameSync = ((from: string, to: string) => {
    real.renameSync(from, to);
    ops.push({ kind: 'rename', from: rel(from), to: rel(to) });
  }) as typeof storeFs.renameSync;
  storeFs.unlinkSync = ((path: string) => {
    real.unlinkSync(path);
    ops.push({ kind: 'unlink', path: rel(path) });
  }) as typeof storeFs.unlinkSync;
  storeFs.mkdirSync = ((path: string, o?: { recursive?: boolean }) => {
    const made = !existsSync(path);
    const out = real.mkdirSync(path, o);
    if (made) ops.push({ kind: 'mkdir', path: rel(path) });
    return out;
  }) as typeof storeFs.mkdirSync;
  storeFs.fsyncSync = ((fd: number) => {
    real.fsyncSync(fd);
    ops.push({ kind: 'fsync', path: fds.get(fd)! });
  }) as typeof storeFs.fsyncSync;
  try {
    return { value: await fn(), ops };
  } finally {
    Object.assign(storeFs, real);
  }
}

/** Every file under `root` (relative path → bytes): the state before the operation. */
export function filesOf(root: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (!/^\.state[.-]lock/.test(e.name)) out.set(relative(root, p), readFileSync(p));
    }
  };
  walk(root);
  return out;
}

const dirOf = (op: FsOp) => dirname(op.kind === 'rename' ? op.to : op.path);
const isData = (op: FsOp) => op.kind === 'write' || op.kind === 'truncate';

/** Ops of the prefix `k` that a later fsync (before k) made durable: data by the file's fsync,
 *  names (create, rename, unlink, mkdir) by their directory's. */
function forced(ops: FsOp[], k: number): boolean[] {
  return ops.slice(0, k).map((op, i) => {
    if (op.kind === 'fsync') return true;
    const later = ops
      .slice(i + 1, k)
      .filter((o) => o.kind === 'fsync')
      .map((o) => o.path);
    if (isData(op)) return later.includes((op as { path: string }).path);
    return (
      later.includes(dirOf(op)) ||
      (op.kind === 'rename' && later.includes(dirname(op.from)) && later.includes(dirOf(op)))
    );
  });
}

export interface CrashState {
  /** Ops issued before the crash. */
  prefix: number;
  /** Indexes of issued ops lost. */
  lost: number[];
  /** The last kept write, kept only in part. */
  torn: boolean;
  files: Map<string, Buffer>;
}

/** Applies the kept ops to the files before. A write to a file whose creation was lost, or a
 *  rename of a file that is not there, does nothing. */
function apply(
  before: Map<string, Buffer>,
  ops: FsOp[],
  keep: (i: number) => boolean,
  tornAt: number,
): Map<string, Buffer> {
  const files = new Map(before);
  ops.forEach((op, i) => {
    if (!keep(i)) return;
    switch (op.kind) {
      case 'create':
        if (!files.has(op.path)) files.set(op.path, Buffer.alloc(0));
        return;
      case 'write': {
        const cur = files.get(op.path);
        if (!cur) return;
        const bytes = i === tornAt ? op.bytes.subarray(0, Math.floor(op.bytes.length / 2)) : op.bytes;
        const next = Buffer.alloc(Math.max(cur.length, op.at + bytes.length));
        cur.copy(next);
        bytes.copy(next, op.at);
        files.set(op.path, next);
        return;
      }
      case 'truncate': {
        const cur = files.get(op.path);
        if (cur)
          files.set(
            op.path,
            Buffer.concat([cur, Buffer.alloc(Math.max(0, op.size - cur.length))]).subarray(0, op.size),
          );
        return;
      }
      case 'rename': {
        const cur = files.get(op.from);
        if (!cur) return;
        files.delete(op.from);
        files.set(op.to, cur);
        return;
      }
      case 'unlink':
        files.delete(op.path);
        return;
      default:
    }
  });
  return files;
}

/** Every crash state of `ops` run on `before` (power loss: `reorder`; kill -9: prefixes only).
 *  Combinations of lost ops beyond `maxLost` per prefix are left out (the count says so). */
export function crashStates(before: Map<string, Buffer>, ops: FsOp[], reorder: boolean): CrashState[] {
  const out: CrashState[] = [];
  for (let k = 0; k <= ops.length; k++) {
    const must = forced(ops, k);
    const free = must.flatMap((f, i) => (f || ops[i]!.kind === 'fsync' ? [] : [i]));
    const subsets = reorder ? 1 << free.length : 1;
    for (let mask = 0; mask < subsets; mask++) {
      const lost = free.filter((_, b) => mask & (1 << b));
      const keep = (i: number) => i < k && !lost.includes(i);
      const lastWrite = [...Array(k).keys()].reverse().find((i) => keep(i) && ops[i]!.kind === 'write' && !must[i]);
      out.push({ prefix: k, lost, torn: false, files: apply(before, ops, keep, -1) });
      if (reorder && lastWrite !== undefined)
        out.push({ prefix: k, lost, torn: true, files: apply(before, ops, keep, lastWrite) });
    }
  }
  return out;
}

/** Writes a crash state out as a project directory. */
export function materialise(state: CrashState, dir: string): void {
  mkdirSync(dir, { recursive: true });
  for (const [path, bytes] of state.files) {
    const file = join(dir, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, bytes);
  }
}

export interface CrashOperation {
  name: string;
  compactBytes?: number;
  /** Compacted just before: the operation's line creates the journal. */
  fresh?: boolean;
  run(p: Proc): Promise<{ acknowledged: string[] }>;
}

/** Contents acknowledged before the operation: one, two (pending). */
export const CRASH_OPERATIONS: CrashOperation[] = [
  { name: 'send', run: async (p) => ({ acknowledged: (await send(p, 'three')).ok ? ['three'] : [] }) },
  { name: 'pull', run: async (p) => ((await pull(p)).result.ok ? { acknowledged: [] } : { acknowledged: [] }) },
  {
    name: 'compaction',
    compactBytes: 0,
    run: async (p) => ({ acknowledged: (await send(p, 'three')).ok ? ['three'] : [] }),
  },
  {
    name: 'first line of a journal',
    fresh: true,
    run: async (p) => ({ acknowledged: (await send(p, 'three')).ok ? ['three'] : [] }),
  },
];

/** Contents the project holds: live, or delivered into a history log. */
async function held(dir: string): Promise<string[]> {
  const s = new FileStore(dir);
  try {
    const state = await s.read();
    const out = Object.values(state.messages).map((m) => m.content);
    const folder = resolvePaths(dir).history;
    let names: string[] = [];
    try {
      names = readdirSync(folder);
    } catch {
      // no history yet
    }
    for (const n of names)
      for (const l of readFileSync(join(folder, n), 'utf8').split('\n'))
        if (l.startsWith('{') && l.endsWith('}')) out.push((JSON.parse(l) as { content: string }).content);
    return out;
  } finally {
    await s.close();
  }
}

/** Records `op` on a fresh copy of a template (one, two pending) and checks its crash states: kill
 *  -9 states all, power-loss states a seeded `limit` of them. */
export async function checkCrash(
  bench: Bench,
  op: CrashOperation,
  durability: 'default' | 'durable',
  limit: number,
  seed: number,
) {
  const template = await bench.template(['one', 'two']);
  const dir = bench.copy(template);
  const p = bench.open(dir, { durability, compactBytes: op.compactBytes });
  if (op.fresh) await p.store.compact();
  await live(p);
  const before = filesOf(dir);
  const { value, ops } = await recordOps(dir, () => op.run(p));
  await bench.closeAll();
  const kill = crashStates(before, ops, false);
  const power = crashStates(before, ops, true);
  const losses: string[] = [];
  const broken: string[] = [];
  const check = async (state: CrashState, kind: 'kill' | 'power') => {
    const at = join(bench.root, `crash${Math.random().toString(16).slice(2)}`);
    materialise(state, at);
    const label = `${kind} after ${state.prefix}/${ops.length} ops, lost [${state.lost.map((i) => `${ops[i]!.kind} ${'path' in ops[i]! ? (ops[i] as { path: string }).path : (ops[i] as { to: string }).to}`).join(', ')}]${state.torn ? ', last write torn' : ''}`;
    let got: string[];
    try {
      got = await held(at);
    } catch (e) {
      broken.push(`${label}: does not load (${(e as Error).message})`);
      return;
    }
    const acked = ['one', 'two', ...(state.prefix === ops.length ? value.acknowledged : [])];
    const missing = acked.filter((m) => !got.includes(m));
    if (missing.length) losses.push(`${label}: lost ${missing.join(', ')}`);
  };
  for (const s of kill) await check(s, 'kill');
  const killLosses = losses.length;
  for (const s of sample(power, limit, seed)) await check(s, 'power');
  return {
    ops,
    kill: kill.length,
    power: power.length,
    checked: kill.length + Math.min(limit, power.length),
    killLosses,
    losses,
    broken,
  };
}
