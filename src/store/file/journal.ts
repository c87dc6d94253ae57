// The journal: what changed since the snapshot in state.json, one line per mutation, appended under
// the state lock. state.json names its journal (`journal_id`); the journal of another id is not
// read (a compaction that wrote a new snapshot may leave the old one behind until it is removed).
//
// A line is `{"n":<1-based count>,"ops":[...],"tag":"<8 hex>"}` followed by "\n", written whole
// or taken back: a killed writer leaves whole lines and at most one torn line at the end. A line
// without its newline (power loss, a full disk, or a reader racing the writer) is not applied, and
// the next writer ends it with `#` (no reader parses it then) and starts a fresh line.
//
// Every reader remembers the last TAIL_BYTES bytes before where it read up to (its `tail`). The
// random tag makes them unique to that line, so a reader or writer whose journal was cut and
// written again under it (a truncate, a restored copy) finds other bytes there, even where the
// length came out the same, and loads again instead of skipping what was written after the cut.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { crypto } from '../../lazy-crypto.ts';
import type { Op } from '../../protocol/draft.ts';
import type { StorePaths } from '../paths.ts';
import { endsWithNewline, NL } from './tail.ts';
import { FILE_KEY_FIELDS, type FileKey } from './file-key.ts';
import { closeQuietly, codeOf, makeDir, openAppend, StoreWriteError, storeFs, writeAll } from './fs.ts';

export const JOURNAL_ID_RE = /^[0-9a-f]{16}$/;

export const journalFile = (paths: Pick<StorePaths, 'journal'>, id: string): string => {
  if (!JOURNAL_ID_RE.test(id)) throw new Error(`journal: invalid id ${JSON.stringify(id)}`);
  return join(paths.journal, `${id}.jsonl`);
};

export interface Entry {
  n: number;
  ops: Op[];
  /** On the last entry of a journal that a compaction ended (store.ts, `followSeal`): the
   *  snapshot that continues it, as its writer saw it right after the rename. The entry's `ops` are
   *  those of the mutation the snapshot was written for, so the journal's lines add up to it; a
   *  reader that does not know seals applies them like any other line. */
  sealed?: unknown;
  /** Random, last in the line (see the top of this file). */
  tag?: string;
}

/** Bytes before a reader's offset that it compares: the tag, its quotes, `}` and the newline. */
const TAIL_BYTES = 12;

/** Random bytes per tag: 8 hex digits, one chance in 2^32 that a line written again after a cut
 *  ends like the one it replaced. */
const TAG_BYTES = 4;
/** Random bytes drawn at once: one randomBytes() call per line would cost more than the tag is
 *  worth; 1,024 tags per call. */
const TAG_POOL_BYTES = 4096;

let pool = Buffer.alloc(0);
let used = 0;
function newTag(): string {
  if (used + TAG_BYTES > pool.length) {
    pool = crypto().randomBytes(TAG_POOL_BYTES);
    used = 0;
  }
  used += TAG_BYTES;
  return pool.toString('hex', used - TAG_BYTES, used);
}

/** The last TAIL_BYTES bytes of `before` followed by `bytes`. */
const tailAfter = (before: Buffer, bytes: Buffer): Buffer =>
  bytes.length >= TAIL_BYTES
    ? Buffer.from(bytes.subarray(bytes.length - TAIL_BYTES))
    : Buffer.concat([before, bytes]).subarray(-TAIL_BYTES);

/** What a writer puts after a torn tail: `#` makes it invalid JSON whatever it holds. */
const TORN_END = '#\n';

/** The journal is not what this process read: cut, or cut and written again. */
export class JournalCut extends Error {}

/** What a seal promises: state.json with exactly this identity holds the state this journal ends
 *  with, and `journal` continues it. */
export interface Seal {
  journal: string;
  key: FileKey;
}

/** The seal as written in a journal line (bigints as decimal strings). */
export const sealLine = (seal: Seal) => ({
  journal: seal.journal,
  ...Object.fromEntries(FILE_KEY_FIELDS.map((k) => [k, seal.key[k].toString()])),
});

/** A seal read back from a line, or null when the entry has none or it is malformed (a reader
 *  then loads the snapshot whole, as it would without seals). */
export function sealOf(entry: Entry): Seal | null {
  const s = entry.sealed as Record<string, unknown> | undefined;
  if (typeof s !== 'object' || s === null || typeof s.journal !== 'string' || !JOURNAL_ID_RE.test(s.journal))
    return null;
  const key = {} as FileKey;
  for (const k of FILE_KEY_FIELDS) {
    const v = s[k];
    if (typeof v !== 'string' || !/^\d{1,30}$/.test(v)) return null;
    key[k] = BigInt(v);
  }
  return { journal: s.journal, key };
}

export type JournalRead =
  | { kind: 'absent' }
  | { kind: 'ok'; entries: Entry[]; offset: number; size: number; tail: Buffer }
  | { kind: 'corrupt'; entries: Entry[]; offset: number; tail: Buffer; cause: string }
  | { kind: 'cut'; cause: string };

/** Reads complete lines from `offset` to the end. `next` is the count the first entry must have;
 *  `tail` the bytes the reader saw right before `offset` (empty at 0): other bytes there, or a
 *  file shorter than `offset`, mean the journal was cut under the reader. */
export function readJournal(file: string, offset: number, next: number, tail: Buffer = EMPTY): JournalRead {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    throw e;
  }
  try {
    const size = fstatSync(fd).size;
    if (size < offset)
      return { kind: 'cut', cause: `the journal is ${size} bytes, shorter than the ${offset} this process had read` };
    const from = offset - tail.length;
    const buf = Buffer.allocUnsafe(size - from);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, from + got);
      if (n === 0) break;
      got += n;
    }
    if (got < tail.length || !buf.subarray(0, tail.length).equals(tail))
      return { kind: 'cut', cause: `the bytes before offset ${offset} are not those this process had read` };
    const entries: Entry[] = [];
    let start = tail.length;
    let at = offset;
    let expect = next;
    const done = (kind: 'ok' | 'corrupt', cause = '') => {
      const end = at - from;
      const last = Buffer.from(buf.subarray(Math.max(0, end - TAIL_BYTES), end));
      return kind === 'ok'
        ? { kind, entries, offset: at, size, tail: last }
        : { kind, entries, offset: at, tail: last, cause };
    };
    for (;;) {
      const end = buf.indexOf(NL, start);
      if (end < 0 || end >= got) break; // an unterminated tail: not (yet) a whole entry
      const line = buf.toString('utf8', start, end);
      const consumed = end + 1 - start;
      start = end + 1;
      if (line === '') {
        at += consumed; // the separator a writer adds after a torn tail
        continue;
      }
      let entry: Entry;
      try {
        entry = JSON.parse(line) as Entry;
      } catch {
        // A torn line (a write cut by power loss): its mutation was never acknowledged, and the
        // next writer wrote the same count again on a fresh line. Real damage breaks the count.
        at += consumed;
        continue;
      }
      if (entry.n !== expect || !Array.isArray(entry.ops))
        return done('corrupt', `entry ${expect} is out of sequence (${JSON.stringify(entry.n)})`);
      entries.push(entry);
      expect++;
      at += consumed;
    }
    return done('ok');
  } finally {
    closeSync(fd);
  }
}

const EMPTY = Buffer.alloc(0);

export interface AppendOptions {
  durable: boolean;
  /** Runs right before the write: a writer whose lock was broken must not write. */
  guard?: () => void;
  /** Where the writer read up to, and the bytes it saw right before that. */
  offset: number;
  tail: Buffer;
  /** The journal's size as `end` found it under this lock, or null to look now. */
  size: number | null;
}

/** Appends entries to one journal at a time, keeping its descriptor open between appends (an
 *  open and a close per mutation cost more than the write). */
export class JournalWriter {
  private fd: number | null = null;
  private id: string | null = null;

  private open(paths: Pick<StorePaths, 'journal'>, id: string, durable: boolean): number {
    if (this.id !== id || this.fd === null) {
      this.close();
      makeDir(paths.journal, durable);
      this.fd = openAppend(journalFile(paths, id), durable);
      this.id = id;
    }
    return this.fd;
  }

  /** The journal's size, after checking that the bytes before `offset` are `tail` (one read,
   *  in place of the stat an append needs anyway); throws JournalCut when they are not. Under
   *  the lock, so the size stays until this process appends. */
  end(paths: Pick<StorePaths, 'journal'>, id: string, offset: number, tail: Buffer): number | null {
    if (offset === 0) return null; // nothing read: nothing to check, and no file to create yet
    const fd = this.open(paths, id, false);
    const buf = Buffer.allocUnsafe(tail.length + 1);
    const got = storeFs.readSync(fd, buf, 0, buf.length, offset - tail.length);
    if (got < tail.length || !buf.subarray(0, tail.length).equals(tail))
      throw new JournalCut(
        got < tail.length
          ? `the journal is shorter than the ${offset} bytes this process had read`
          : `the bytes before offset ${offset} are not those this process had read`,
      );
    return got === tail.length ? offset : storeFs.fstatSync(fd).size;
  }

  /** Appends one entry whole, or not at all (what a failed write left is cut off again); returns
   *  the journal's size after it and the tail there. */
  append(
    paths: Pick<StorePaths, 'journal'>,
    id: string,
    entry: Entry,
    opts: AppendOptions,
  ): { offset: number; tail: Buffer } {
    const fd = this.open(paths, id, opts.durable);
    const size = opts.size ?? storeFs.fstatSync(fd).size;
    const json = JSON.stringify(entry);
    let text = `${json.slice(0, -1)},"tag":"${newTag()}"}\n`;
    // Past what was read there can only be a torn tail (a write cut short): ended as a line no
    // reader parses, then a fresh line. A bare newline would make a whole entry of a tail that
    // lacked only its newline, counted the same as this one.
    if (size !== opts.offset && size > 0 && !endsWithNewline(fd, size)) text = `${TORN_END}${text}`;
    opts.guard?.();
    const bytes = Buffer.from(text);
    try {
      writeAll(fd, bytes);
      if (opts.durable) storeFs.fsyncSync(fd);
    } catch (e) {
      this.takeBack(fd, size);
      throw new StoreWriteError(codeOf(e), 'the journal', e);
    }
    return { offset: size + bytes.length, tail: tailAfter(opts.tail, bytes) };
  }

  /** Cuts what a failed append left. Should that fail too, a torn part stays unterminated, which
   *  no reader applies; only a whole line whose fsync failed would stay readable then. */
  private takeBack(fd: number, size: number) {
    try {
      storeFs.ftruncateSync(fd, size);
    } catch {
      this.close();
    }
  }

  close(): void {
    if (this.fd !== null) closeQuietly(this.fd);
    this.fd = null;
    this.id = null;
  }
}
