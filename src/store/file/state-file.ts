// Reading and writing `state.json` itself: classification of what is on disk (protocol.md "Loading (fail-closed)")
// and the atomic save. No locking and no recovery here; load.ts decides what to do.
import { close, closeSync, fstat, fstatSync, open, openSync, readFile } from 'node:fs';
import type { BigIntStats } from 'node:fs';
import { promisify } from 'node:util';
import { MAX_STATE_FILE_BYTES, SCHEMA_VERSION } from '../../protocol/limits.ts';
import { RefusalError, refuse } from '../../protocol/result.ts';
import { parseState } from '../../protocol/schema.ts';
import type { State } from '../../protocol/schema.ts';
import { writeAtomic } from './atomic.ts';
import { keyOf, type FileKey } from './file-key.ts';
import { JOURNAL_ID_RE } from './journal.ts';
import type { StorePaths } from '../paths.ts';

const pOpen = promisify(open);
const pFstat = promisify(fstat) as (fd: number, o: { bigint: true }) => Promise<BigIntStats>;
const pReadFile = promisify(readFile) as (fd: number) => Promise<Buffer>;
const pClose = promisify(close);

/** A FileKey plus an open descriptor on that inode. While it is open the inode cannot be freed,
 *  so its number cannot be handed to a later save (ext4 reuses freed inode numbers at once, and
 *  mtime ticks are coarse): an ino match then really is the same file. */
export interface Pinned {
  fd: number;
  key: FileKey;
}

export const unpin = (p: Pinned | null | undefined) => {
  if (p) close(p.fd, () => {});
};

/** Test and bench hook: state.json parses (JSON + zod), fast-path hits that skipped one,
 *  compactions followed by their seal instead of a parse, and journal lines read back from disk
 *  and applied (other processes' writes, or a journal replayed after a load). */
export const storeStats = { parses: 0, cacheHits: 0, sealsFollowed: 0, linesApplied: 0 };

export type FileRead =
  | { kind: 'absent' }
  | { kind: 'ok'; state: State; journalId: string | null; journalCreated: boolean; pin: Pinned }
  | { kind: 'corrupt'; cause: string; text: Buffer };

const unreadable = (code: string, detail: string) =>
  new RefusalError(
    refuse('state_unreadable', `.opencomms/state.json cannot be read (${code}: ${detail}); nothing was changed.`, {
      code,
    }),
  );

const MIB = 1024 * 1024;
const tooLarge = (size: bigint) =>
  new RefusalError(
    refuse(
      'state_too_large',
      `.opencomms/state.json is ${Number(size / BigInt(MIB))} MiB, over the ${MAX_STATE_FILE_BYTES / MIB} MiB a state may have; it was not read and nothing was changed. Move it aside and inspect it (\`opencomms doctor\` reports it).`,
      { bytes: Number(size), limit: MAX_STATE_FILE_BYTES },
    ),
  );

/** Lock-free read. Refusals (unreadable, incompatible) are thrown; corrupt is returned for the
 *  caller to recover under the lock. */
export async function readStateFile(paths: Pick<StorePaths, 'state'>): Promise<FileRead> {
  let fd: number;
  try {
    fd = await pOpen(paths.state, 'r');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') return { kind: 'absent' };
    throw unreadable(err.code ?? 'EIO', err.message);
  }
  let keep = false;
  try {
    // Stat and bytes come from the same descriptor, so the key describes exactly what we parse.
    const st = await pFstat(fd, { bigint: true });
    if (!st.isFile()) throw unreadable('EISDIR', 'not a regular file');
    if (st.size > MAX_STATE_FILE_BYTES) throw tooLarge(st.size);
    let text: Buffer;
    try {
      text = await pReadFile(fd);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      throw unreadable(err.code ?? 'EIO', err.message);
    }
    const out = classify(text.toString('utf8'));
    if (!out.ok) return { kind: 'corrupt', cause: out.cause, text };
    keep = true;
    return {
      kind: 'ok',
      state: out.state,
      journalId: out.journalId,
      journalCreated: out.journalCreated,
      pin: { fd, key: keyOf(st) },
    };
  } finally {
    if (!keep) await pClose(fd).catch(() => {});
  }
}

/** Text → state, or the cause of corruption. An integer schema_version other than ours is not
 *  corruption: it is a newer (or older) OpenComms' file and must never be touched. */
export function classify(
  text: string,
): { ok: true; state: State; journalId: string | null; journalCreated: boolean } | { ok: false; cause: string } {
  storeStats.parses++;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return { ok: false, cause: `not valid JSON (${(e as Error).message})` };
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    return { ok: false, cause: 'root is not an object' };
  const v = (raw as { schema_version?: unknown }).schema_version;
  if (!Number.isInteger(v)) return { ok: false, cause: 'schema_version missing or not an integer' };
  if (v !== SCHEMA_VERSION)
    throw new RefusalError(
      refuse(
        'state_incompatible',
        `.opencomms/state.json has schema_version ${v}; this OpenComms reads schema ${SCHEMA_VERSION}. The file was left untouched.`,
        { schema_version: v },
      ),
    );
  // The additive `journal_id` names the journal that continues this snapshot (journal.ts), and
  // `journal_created` says that journal was created before the snapshot was written: its
  // absence is then damage, not a journal nobody wrote yet.
  const { journal_id: journal, journal_created: created, ...rest } = raw as Record<string, unknown>;
  const journalId = typeof journal === 'string' && JOURNAL_ID_RE.test(journal) ? journal : null;
  const parsed = parseState(rest);
  return parsed.ok
    ? { ok: true, state: parsed.state, journalId, journalCreated: journalId !== null && created === true }
    : { ok: false, cause: parsed.cause };
}

/** Pretty JSON (protocol.md "State files"); `journalId` names the journal that continues this snapshot, if any. */
export const serialize = (state: State, journalId: string | null = null): string =>
  [...serializeChunks(state, journalId)].join('');

/** The text `serialize` returns, in pieces: a map of the state's (`messages`, `queues`, ...)
 *  SERIALIZE_BATCH entries at a time. A compaction writes these as they come: a large state's text
 *  built whole (and its bytes again for the write) would grow the server's heap for good, however
 *  small the state becomes after. */
export function* serializeChunks(state: State, journalId: string | null = null): Generator<string> {
  // The journal id first, for a reader's eye. Its file is created before the snapshot (store.ts).
  const head = { schema_version: state.schema_version, journal_id: journalId, journal_created: true };
  const top: object = journalId ? { ...head, ...state } : state;
  // Each piece is JSON.stringify(…, null, 2) of a one-key object holding it at the depth it has in
  // the state, cut out of that wrapper: the same text as the whole, with no re-indenting pass.
  let first = true;
  yield '{';
  for (const [key, value] of Object.entries(top)) {
    if (value === undefined || typeof value === 'function') continue;
    const sep = first ? '\n' : ',\n';
    first = false;
    if (!isMap(value)) {
      yield sep + JSON.stringify({ [key]: value }, null, 2).slice(2, -2); // '{\n' … '\n}'
      continue;
    }
    const open = `{\n  ${JSON.stringify(key)}: {`;
    const keys = Object.keys(value);
    let entries = false;
    for (let i = 0; i < keys.length; i += SERIALIZE_BATCH) {
      const part: Record<string, unknown> = Object.create(null); // `__proto__` is a key like any other
      for (const k of keys.slice(i, i + SERIALIZE_BATCH)) part[k] = value[k];
      const text = JSON.stringify({ [key]: part }, null, 2);
      if (text.endsWith('{}\n}')) continue; // nothing in it JSON writes
      yield (entries ? ',' : sep + open.slice(2)) + text.slice(open.length, -'\n  }\n}'.length);
      entries = true;
    }
    yield entries ? '\n  }' : `${sep}${open.slice(2)}}`;
  }
  yield first ? '}\n' : '\n}\n';
}

/** Entries per piece of a map (see serializeChunks): a few hundred KB of text. */
const SERIALIZE_BATCH = 256;

const isMap = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as { toJSON?: unknown }).toJSON !== 'function';

export interface SaveOptions {
  guard?: () => void;
  durable?: boolean;
}

/** Atomic save; returns a pin on what was written. Only call under the lock: the file we open
 *  after the rename is ours only because nobody else may rename in between. */
export async function saveState(
  paths: Pick<StorePaths, 'state'>,
  text: string,
  opts: SaveOptions = {},
): Promise<Pinned> {
  await writeAtomic(paths.state, text, { tmpPrefix: '.state', ...opts });
  return pinFile(paths.state);
}

/** A pin on the file now at `file` (opened, then its key from the descriptor). */
export function pinFile(file: string): Pinned {
  const fd = openSync(file, 'r');
  try {
    return { fd, key: keyOf(fstatSync(fd, { bigint: true })) };
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}
