// The journal: what changed since the snapshot in state.json, one line per mutation, appended under
// the state lock. state.json names its journal (`journal_id`); the journal of another id is not
// read (a compaction that wrote a new snapshot may leave the old one behind until it is removed).
//
// A line is `{"n":<1-based count>,"ops":[...]}` followed by "\n", written with one write() call:
// a killed writer leaves a whole line or none. A line without its newline (power loss, or a reader
// racing the writer) is not applied, and the next writer starts on a fresh line.
import { closeSync, fstatSync, fsyncSync, mkdirSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Op } from '../protocol/draft.ts';
import type { StorePaths } from './paths.ts';
import { endsWithNewline, NL } from './tail.ts';
import { FILE_KEY_FIELDS, type FileKey } from './file-key.ts';

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
}

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
  if (typeof s !== 'object' || s === null || typeof s.journal !== 'string' || !JOURNAL_ID_RE.test(s.journal)) return null;
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
  | { kind: 'ok'; entries: Entry[]; offset: number; size: number }
  | { kind: 'corrupt'; entries: Entry[]; offset: number; cause: string };


/** Reads complete lines from `offset` to the end. `next` is the count the first entry must have. */
export function readJournal(file: string, offset: number, next: number): JournalRead {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    throw e;
  }
  try {
    const size = fstatSync(fd).size;
    if (size < offset) return { kind: 'corrupt', entries: [], offset, cause: `the journal shrank below offset ${offset}` };
    const entries: Entry[] = [];
    if (size === offset) return { kind: 'ok', entries, offset, size };
    const buf = Buffer.allocUnsafe(size - offset);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, offset + got);
      if (n === 0) break;
      got += n;
    }
    let start = 0;
    let at = offset;
    let expect = next;
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
        return { kind: 'corrupt', entries, offset: at, cause: `entry ${expect} is out of sequence (${JSON.stringify(entry.n)})` };
      entries.push(entry);
      expect++;
      at += consumed;
    }
    return { kind: 'ok', entries, offset: at, size };
  } finally {
    closeSync(fd);
  }
}

export interface AppendOptions {
  durable: boolean;
  /** Runs right before the write: a writer whose lock was broken must not write. */
  guard?: () => void;
  /** Where the writer read up to: the journal ends there unless a torn tail follows. */
  offset: number;
}

/** Appends entries to one journal at a time, keeping its descriptor open between appends (an
 *  open and a close per mutation cost more than the write). */
export class JournalWriter {
  private fd: number | null = null;
  private id: string | null = null;

  /** Appends one entry; returns the journal's size after it (the offset a reader is now at, a
   *  torn tail before it skipped). */
  append(paths: Pick<StorePaths, 'journal'>, id: string, entry: Entry, opts: AppendOptions): number {
    if (this.id !== id || this.fd === null) {
      this.close();
      mkdirSync(paths.journal, { recursive: true });
      this.fd = openSync(journalFile(paths, id), 'a+');
      this.id = id;
    }
    const fd = this.fd;
    const size = fstatSync(fd).size;
    let text = `${JSON.stringify(entry)}\n`;
    // Past what was read there can only be a torn tail (a write cut by power loss): a fresh line.
    if (size !== opts.offset && size > 0 && !endsWithNewline(fd, size)) text = `\n${text}`;
    opts.guard?.();
    const bytes = Buffer.from(text);
    writeSync(fd, bytes);
    if (opts.durable) fsyncSync(fd);
    return size + bytes.length;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    this.id = null;
  }
}
