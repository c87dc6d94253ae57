// Change tracking for in-place mutation of a state tree. A mutation changes the live state object
// itself (no copy of the whole state per call) through a recording proxy that keeps
// - an undo log, so a refusal or a fault puts every value back;
// - the set of written paths, turned at the end into a few replayable operations (the store's
//   journal line), with values read at that moment.
// Pure data-structure code: no I/O, no clock.
//
// Reading through the proxy wraps every nested object; a scan over many entities would create a
// proxy per entity, so read-only scans use `raw()`, which yields the plain (current) objects. A
// write must go through the proxy: the store checks, under test, that what was recorded
// reproduces the state exactly.

export type Path = readonly string[];

/** One replayable change. `s`: set the value at the path; `d`: delete it; `a`: append items to the
 *  array at the path. Paths never overlap within one entry, but for a key deleted and set again:
 *  `d` then `s`, so that the replay moves it last among its object's keys, as the writer did. */
export type Op = readonly ['s', Path, unknown] | readonly ['d', Path] | readonly ['a', Path, unknown[]];

const TARGET = Symbol('draft.target');

type Obj = Record<string | symbol, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null;
const isPlainObject = (v: unknown): v is Record<string, unknown> => isObject(v) && !Array.isArray(v);

/** Whether a value is a draft proxy. */
export const isDraft = (v: unknown): boolean => isObject(v) && (v as Obj)[TARGET] !== undefined;

/** The plain object behind a draft proxy (or the value itself). For read-only scans. */
export function raw<T>(v: T): T {
  return isObject(v) ? (((v as Obj)[TARGET] as T | undefined) ?? v) : v;
}

/** Replaces every draft proxy inside a value by its plain object, so a value assigned into the
 *  state never keeps a proxy (whose recorder is gone once the mutation ends). */
function unwrapDeep(v: unknown, seen?: Set<object>): unknown {
  if (!isObject(v)) return v;
  const t = (v as Obj)[TARGET] as object | undefined;
  if (t) return t;
  // Created here, not as a default: most writes are of plain values, which need none.
  seen ??= new Set<object>();
  if (seen.has(v)) return v;
  seen.add(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x = v[i];
      if (isObject(x)) {
        const u = unwrapDeep(x, seen);
        if (u !== x) v[i] = u;
      }
    }
  } else {
    for (const k of Object.keys(v)) {
      const x = (v as Obj)[k];
      if (isObject(x)) {
        const u = unwrapDeep(x, seen);
        if (u !== x) (v as Obj)[k] = u;
      }
    }
  }
  return v;
}

interface Undo {
  target: Obj;
  key: string | symbol;
  had: boolean;
  old: unknown;
}

export interface Draft<T extends object> {
  /** The object to hand to the mutation: reads and writes go to the live state, recorded. */
  readonly root: T;
  /** Puts back every value written through `root`, newest first. */
  rollback(): void;
  /** The written paths as operations, with the values they hold now. */
  ops(): Op[];
}

/** How deep a written path is kept before it is cut: `messages.<id>.status` stays three deep, so
 *  a send writes its new envelope, not the whole `messages` map; an entry of a channel's map
 *  field (`channels.<name>.seen_content.<key>`) four deep, so a send writes the key it adds to its
 *  duplicate window, not the window's 100 keys. */
const MAX_DEPTH = 4;

/** Each wrapped object's path, and the key under which a write to one of its fields is kept
 *  (its path joined, cut at MAX_DEPTH), built once per object instead of on every write. */
type PathOf = WeakMap<object, { path: Path; prefix: string }>;

/** A written object field: its path and the value before the first write there. */
interface FieldWrite {
  path: Path;
  old: unknown;
  hadOld: boolean;
  seq: number;
  readded?: boolean;
}

/** An array written to: its length at the first write and whether every write only appended. */
interface ArrayWrite {
  path: Path;
  length: number;
  appendOnly: boolean;
  seq: number;
}

/** What one draft wrote: the undo log, and the fields and arrays written, in first-write order. */
class Writes {
  readonly undo: Undo[] = [];
  readonly arrays = new Map<object, ArrayWrite>();
  /** Written paths (joined by \u0000) → the write. */
  readonly written = new Map<string, FieldWrite>();
  /** Order of first writes: ops come out in it, so a replay adds new keys in the writer's order. */
  private seq = 0;
  live = true;

  constructor(private readonly paths: PathOf) {}

  /** `next` is the value being written (undefined for a delete). */
  record(target: Obj, key: string | symbol, had: boolean, old: unknown, next: unknown) {
    if (!this.live) throw new Error('draft: a write after the mutation ended (a proxy escaped)');
    const undo = this.undo;
    // Writing past an array's end grows its length with no write to `length`: undo that too.
    if (Array.isArray(target) && key !== 'length' && typeof key === 'string' && Number(key) >= target.length)
      undo.push({ target, key: 'length', had: true, old: target.length });
    undo.push({ target, key, had, old });
    // Shrinking an array through `length` drops elements with no delete per index: keep them.
    if (Array.isArray(target) && key === 'length' && typeof next === 'number')
      for (let i = next; i < target.length; i++) undo.push({ target, key: String(i), had: true, old: target[i] });
    if (typeof key === 'symbol') return;
    const { path: base, prefix } = this.paths.get(target)!;
    if (Array.isArray(target)) {
      let a = this.arrays.get(target);
      if (!a) this.arrays.set(target, (a = { path: base, length: target.length, appendOnly: true, seq: this.seq++ }));
      // Appending = writing new indices at or past the first-seen length, and never shrinking.
      if (key === 'length') {
        if (typeof next !== 'number' || next < a.length) a.appendOnly = false;
      } else if (had || !(Number(key) >= a.length)) a.appendOnly = false;
      return;
    }
    // The path written is the field's own, or cut to its entity field when deeper.
    const whole = base.length < MAX_DEPTH;
    const id = whole ? prefix + key : prefix;
    const w = this.written.get(id);
    if (!w)
      this.written.set(id, {
        path: whole ? [...base, key] : base.slice(0, MAX_DEPTH),
        old: whole ? old : undefined,
        hadOld: whole && had,
        seq: this.seq++,
      });
    else if (!whole)
      w.hadOld = false; // written inside too: no diff against the old value
    // A key that was there, deleted and set again now comes last among its object's keys: the
    // replay must move it too (a duplicate window sweeps its keys in that order).
    else if (w.hadOld && !had && next !== undefined) w.readded = true;
  }

  rollback() {
    const undo = this.undo;
    for (let i = undo.length - 1; i >= 0; i--) {
      const u = undo[i]!;
      if (u.had) u.target[u.key] = u.old;
      else delete u.target[u.key];
    }
    undo.length = 0;
    this.live = false;
  }
}

export function track<T extends object>(state: T): Draft<T> {
  const paths: PathOf = new WeakMap();
  const proxies = new WeakMap<object, object>();
  const writes = new Writes(paths);

  const wrap = (target: object, path: Path): object => {
    let p = proxies.get(target);
    if (!p) {
      paths.set(target, {
        path,
        prefix:
          path.length >= MAX_DEPTH ? path.slice(0, MAX_DEPTH).join('\u0000') : path.map((k) => `${k}\u0000`).join(''),
      });
      p = new Proxy(target, handler);
      proxies.set(target, p);
    }
    return p;
  };

  const handler: ProxyHandler<Obj> = {
    get(target, key, receiver) {
      if (key === TARGET) return target;
      const v = Reflect.get(target, key, receiver);
      if (!isObject(v) || typeof key === 'symbol' || typeof v === 'function') return v;
      // The path is built only for an object read for the first time: reads repeat.
      return proxies.get(v) ?? wrap(v, [...paths.get(target)!.path, key]);
    },
    set(target, key, value) {
      const had = Object.hasOwn(target, key);
      const old = target[key];
      // A machine writes back its whole record, mostly unchanged: the value already there (the
      // 100-key duplicate window) is not walked for proxies.
      const v = had && old === value ? old : unwrapDeep(value);
      if (had && old === v && key !== 'length') return true;
      writes.record(target, key, had, old, v);
      target[key] = v;
      return true;
    },
    deleteProperty(target, key) {
      if (!Object.hasOwn(target, key)) return true;
      writes.record(target, key, true, target[key], undefined);
      delete target[key];
      return true;
    },
    defineProperty(target, key, desc) {
      const had = Object.hasOwn(target, key);
      writes.record(target, key, had, target[key], desc.value);
      return Reflect.defineProperty(target, key, { ...desc, value: unwrapDeep(desc.value) });
    },
  };

  return {
    root: wrap(state, []) as T,
    rollback: () => writes.rollback(),
    ops() {
      writes.live = false;
      return opsOf(state, writes);
    },
  };
}

/** A path to write whole (`set`) or to append to from index `from` (`append`). */
interface PathWrite {
  path: Path;
  kind: 'set' | 'append';
  seq: number;
  from?: number;
  old?: unknown;
  hadOld?: boolean;
  readded?: boolean;
  /** Another written path lies under this one. */
  nested?: boolean;
}

/** Every write of `writes` as a path, none under another, in first-write order: object fields
 *  (cut to MAX_DEPTH) and whole arrays. */
function pathWrites(writes: Writes) {
  const byPath = new Map<string, PathWrite>();
  for (const [id, w] of writes.written)
    byPath.set(id, { path: w.path, kind: 'set', seq: w.seq, old: w.old, hadOld: w.hadOld, readded: w.readded });
  for (const a of writes.arrays.values()) {
    // An array inside a field below MAX_DEPTH is covered by that field's value.
    const path = a.path.length > MAX_DEPTH ? a.path.slice(0, MAX_DEPTH) : a.path;
    const id = path.join('\u0000');
    const whole = path.length < a.path.length || !a.appendOnly;
    const had = byPath.get(id);
    // A field written as a whole covers the array; an append meeting any other write is a set.
    if (had?.kind === 'set') {
      had.hadOld = false; // its old value was changed in place: no diff against it
      continue;
    }
    const first = Math.min(a.seq, had?.seq ?? a.seq);
    byPath.set(
      id,
      whole || had ? { path, kind: 'set', seq: first } : { path, kind: 'append', seq: first, from: a.length },
    );
  }
  // A path under another written path is covered by that path's value; an append covers
  // nothing, so an array with writes inside its old elements is set whole, and a map with
  // writes inside it is not diffed against its old value.
  const ids = [...byPath.keys()].sort();
  // Sorted, a path's descendants follow it directly ("\u0000" sorts before every other
  // character), so one look at the next id answers: linear, not quadratic, in the writes.
  const position = new Map(ids.map((id, i) => [id, i]));
  const hasDescendant = (id: string) => ids[position.get(id)! + 1]?.startsWith(`${id}\u0000`) ?? false;
  for (const id of ids) {
    const w = byPath.get(id)!;
    if (!hasDescendant(id)) continue;
    if (w.kind === 'append') byPath.set(id, { path: w.path, kind: 'set', seq: w.seq, nested: true });
    else w.nested = true;
  }
  const covered = new Set<string>();
  let covering: string | null = null;
  for (const id of ids) {
    if (covering !== null && id.startsWith(`${covering}\u0000`)) covered.add(id);
    else covering = id;
  }
  return ids
    .filter((id) => !covered.has(id))
    .map((id) => byPath.get(id)!)
    .sort((a, b) => a.seq - b.seq);
}

/** The written paths as operations, with the values they hold now in `state`. */
function opsOf(state: object, writes: Writes): Op[] {
  const valueAt = (path: Path): { present: boolean; value: unknown } => {
    let cur: unknown = state;
    for (const k of path) {
      if (!isObject(cur) || !Object.hasOwn(cur, k)) return { present: false, value: undefined };
      cur = (cur as Obj)[k];
    }
    return { present: true, value: cur };
  };
  const ops: Op[] = [];
  for (const w of pathWrites(writes)) {
    const now = valueAt(w.path);
    if (!now.present) ops.push(['d', w.path]);
    else if (w.kind === 'append') {
      const items = (now.value as unknown[]).slice(w.from);
      if (items.length) ops.push(['a', w.path, items]);
    } else if (w.readded) ops.push(['d', w.path], ['s', w.path, now.value]);
    else if (w.hadOld && isPlainObject(w.old) && isPlainObject(now.value) && w.old !== now.value && !w.nested)
      // A replaced map (a machine assigns a fresh object) nothing else wrote into: its changed keys only.
      mapChanges(w.path, w.old, now.value, ops);
    else ops.push(['s', w.path, now.value]);
  }
  return ops;
}

/** The keys of map `before` gone from `after`, then those added or changed, as ops at `path`.
 *  Indexed loops over keys: a duplicate window of 100 keys is diffed on every send, and a pair
 *  array and an iterator result per key were a sixth of what a send allocated. */
function mapChanges(path: Path, before: Record<string, unknown>, after: Record<string, unknown>, ops: Op[]) {
  const gone = Object.keys(before);
  for (let i = 0; i < gone.length; i++) if (!(gone[i]! in after)) ops.push(['d', [...path, gone[i]!]]);
  const keys = Object.keys(after);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    if (!(k in before) || before[k] !== after[k]) ops.push(['s', [...path, k], after[k]]);
  }
}

/** A copy of `v` with every draft proxy inside it replaced by a deep copy of its plain object, so
 *  nothing handed out of a mutation aliases the live state. Plain parts are shared. */
export function detach<T>(v: T): T {
  if (!isObject(v)) return v;
  if (isDraft(v)) return structuredClone(raw(v));
  if (Array.isArray(v)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const d = detach(v[i]);
      if (d !== v[i]) (copy ??= v.slice())[i] = d;
    }
    return (copy ?? v) as T;
  }
  let copy: Obj | null = null;
  for (const k of Object.keys(v)) {
    const x = (v as Obj)[k];
    const d = detach(x);
    if (d !== x) (copy ??= { ...(v as Obj) })[k] = d;
  }
  return (copy ?? v) as T;
}

const ABSENT = Symbol('absent');
const LENGTH = Symbol('length');

/** Replays operations onto a plain state (the store's reload, another process's catch-up).
 *  Returns what puts the state back as it was: a replayed entry that turns out invalid must
 *  leave no trace, or the damage it carried would be kept as "the state before the damage". */
export function applyOps(state: object, ops: readonly Op[]): () => void {
  // Undo records as flat triples (object, key, old value or ABSENT; an array's old length under
  // LENGTH), not a closure per written key: a replayed send line applied in 0.73–0.82 of the time.
  const undo: unknown[] = [];
  const keep = (obj: Obj, key: string) => {
    undo.push(obj, key, Object.hasOwn(obj, key) ? obj[key] : ABSENT);
  };
  for (const op of ops) {
    const path = op[1];
    let cur = state as Obj;
    for (let i = 0; i < path.length - 1; i++) {
      const k = path[i]!;
      let next = cur[k];
      if (!isObject(next)) {
        keep(cur, k);
        cur[k] = next = {};
      }
      cur = next as Obj;
    }
    const last = path[path.length - 1]!;
    const arr = cur[last];
    if (op[0] === 'a' && Array.isArray(arr)) {
      undo.push(arr, LENGTH, arr.length);
      arr.push(...op[2]);
      continue;
    }
    keep(cur, last);
    if (op[0] === 's') cur[last] = op[2];
    else if (op[0] === 'd') delete cur[last];
    else cur[last] = [...op[2]];
  }
  return () => {
    for (let i = undo.length - 3; i >= 0; i -= 3) {
      const obj = undo[i] as Obj;
      const key = undo[i + 1] as string | typeof LENGTH;
      const old = undo[i + 2];
      if (key === LENGTH) (obj as unknown as unknown[]).length = old as number;
      else if (old === ABSENT) delete obj[key];
      else obj[key] = old;
    }
  };
}
