// Saved-session archives, `archives/<channel_id>.json` (protocol.md "Archives"). Ids are checked
// against ARCHIVE_ID_RE before any path is built from one. Lists read archive heads from an index
// (`archives/.index.json`) keyed by each file's identity, so a listing parses only the archives
// that changed since the index was written, and a lookup by name parses only the archive it
// returns. The index is written with the archives (save, delete), under the state lock; a read
// never writes a file, and remembers what it parsed in this process only.
import { readFileSync, statSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isArchiveId } from '../../protocol/ids.ts';
import {
  archiveNamed,
  ArchiveHeadSchema,
  ArchiveSchema,
  type Archive,
  type ArchiveHead,
  type ArchiveInput,
} from '../../protocol/archive.ts';
export { ArchiveSchema, type Archive, type ArchiveHead, type ArchiveInput };
import { writeAtomic, writeAtomicSync } from './atomic.ts';
import { FILE_KEY_FIELDS } from './file-key.ts';
import { makeDir, storeFs } from './fs.ts';
import type { StorePaths } from '../paths.ts';
import type { InvalidFile } from '../types.ts';

/** Whole archives parsed by this process (tests check that reads stay lazy). */
export const archiveStats = { parsed: 0 };

const archiveFile = (paths: Pick<StorePaths, 'archives'>, id: string) => join(paths.archives, `${id}.json`);

/** Writes an archive; returns what takes it back (the state write that follows failed: the
 *  channel is still live, and a failed operation leaves no trace), which puts back the file it
 *  replaced, if any. */
export async function writeArchive(
  paths: Pick<StorePaths, 'archives'>,
  archive: ArchiveInput,
  durable = false,
): Promise<() => void> {
  if (!isArchiveId(archive.channel_id))
    throw new Error(`archive: invalid channel id ${JSON.stringify(archive.channel_id)}`);
  const parsed = ArchiveSchema.parse(archive); // never write a file the reader would skip
  const file = archiveFile(paths, parsed.channel_id);
  makeDir(paths.archives, durable);
  const before = previous(file);
  await writeAtomic(file, `${JSON.stringify(parsed, null, 2)}\n`, { tmpPrefix: '.arch', durable });
  await writeIndex(paths);
  return () => {
    try {
      if (before === null) storeFs.unlinkSync(file);
      else writeAtomicSync(file, before, { tmpPrefix: '.arch', durable });
    } catch {
      // the file system refuses every write: the archive stays, of a channel still live
    }
  };
}

function previous(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

type ReadOutcome = { ok: true; archive: Archive } | { ok: false; cause: string };

async function load(paths: Pick<StorePaths, 'archives'>, id: string): Promise<ReadOutcome> {
  archiveStats.parsed++;
  let text: string;
  try {
    text = await readFile(archiveFile(paths, id), 'utf8');
  } catch (e) {
    return { ok: false, cause: (e as NodeJS.ErrnoException).code ?? 'unreadable' };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, cause: 'not valid JSON' };
  }
  const r = ArchiveSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    return { ok: false, cause: `${i?.path.join('.') || '(root)'}: ${i?.message ?? 'invalid'}` };
  }
  if (r.data.channel_id !== id)
    return { ok: false, cause: `channel_id ${r.data.channel_id} does not match the file name` };
  return { ok: true, archive: r.data };
}

/** null for a bad id, a missing file or an invalid one. */
export async function readArchive(paths: Pick<StorePaths, 'archives'>, id: string): Promise<Archive | null> {
  if (!isArchiveId(id)) return null;
  const r = await load(paths, id);
  return r.ok ? r.archive : null;
}

/** The index: per archive file, the identity of the version it describes and that version's
 *  head, or why the file is invalid. A cache only: an entry whose identity no longer matches the
 *  file is read again, and a missing or unreadable index is rebuilt. */
const INDEX_FILE = '.index.json';
interface IndexEntry {
  key: string;
  head?: ArchiveHead;
  cause?: string;
}
type Index = Map<string, IndexEntry>;

/** Synchronous on purpose: a listing stats every archive, and 120 thread-pool hops cost more than
 *  the stats themselves. Throws like stat (a missing file). */
const keyOf = (file: string): string => {
  const st = statSync(file, { bigint: true });
  return FILE_KEY_FIELDS.map((f) => String(st[f])).join(':');
};
const keyOrNone = (file: string): string => {
  try {
    return keyOf(file);
  } catch {
    return '';
  }
};

/** The index this process read last, per archives directory, with the identity of the index
 *  file it came from, plus what its own listings parsed since: a long-lived reader (the console)
 *  parses the file only when it changed, and each changed archive once. */
const readIndexes = new Map<string, { key: string; index: Index }>();

/** The index as written, each head checked like an archive's (it is shown to agents too);
 *  anything malformed is simply not used. */
async function readIndex(paths: Pick<StorePaths, 'archives'>): Promise<Index> {
  const file = join(paths.archives, INDEX_FILE);
  const key = keyOrNone(file);
  const kept = readIndexes.get(paths.archives);
  if (kept && kept.key === key) return new Map(kept.index); // '' === '': still no index file
  const index = key ? await parseIndex(file) : new Map<string, IndexEntry>();
  readIndexes.set(paths.archives, { key, index: new Map(index) });
  return index;
}

async function parseIndex(file: string): Promise<Index> {
  const index: Index = new Map();
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    return index;
  }
  if (raw === null || typeof raw !== 'object') return index;
  for (const [file, e] of Object.entries(raw as Record<string, { key?: unknown; head?: unknown; cause?: unknown }>)) {
    if (typeof e?.key !== 'string') continue;
    if (typeof e.cause === 'string') index.set(file, { key: e.key, cause: e.cause });
    const head = ArchiveHeadSchema.safeParse(e.head);
    if (head.success && `${head.data.channel_id}.json` === file) index.set(file, { key: e.key, head: head.data });
  }
  return index;
}

/** One file's index entry: the cached one when the file is the version it describes, else read
 *  now (and cached only if the file did not change while it was read). */
async function entryFor(
  paths: Pick<StorePaths, 'archives'>,
  file: string,
  cached: IndexEntry | undefined,
): Promise<{ entry: IndexEntry; fresh: boolean }> {
  const path = join(paths.archives, file);
  let key: string;
  try {
    key = keyOf(path);
  } catch (e) {
    return { entry: { key: '', cause: (e as NodeJS.ErrnoException).code ?? 'unreadable' }, fresh: false };
  }
  if (cached?.key === key) return { entry: cached, fresh: false };
  const r = await load(paths, file.slice(0, -'.json'.length));
  const entry: IndexEntry = r.ok ? { key, head: headOf(r.archive) } : { key, cause: r.cause };
  const still = keyOrNone(path);
  return { entry, fresh: still === key };
}

const headOf = (a: Archive): ArchiveHead => {
  const { messages: _messages, ...head } = a;
  return head;
};

/** Every archive file's head or why it is invalid, and the index entries that describe them now. */
async function scanArchives(
  paths: Pick<StorePaths, 'archives'>,
): Promise<{ archives: ArchiveHead[]; invalid: InvalidFile[]; index: Index }> {
  let names: string[];
  try {
    names = await readdir(paths.archives);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { archives: [], invalid: [], index: new Map() };
    throw e;
  }
  const index = await readIndex(paths);
  const next: Index = new Map();
  let changed = false;
  const archives: ArchiveHead[] = [];
  const invalid: InvalidFile[] = [];
  for (const file of names.filter((n) => n.endsWith('.json') && !n.startsWith('.')).sort()) {
    if (!isArchiveId(file.slice(0, -'.json'.length))) {
      invalid.push({ file, cause: 'file name is not an archive id' });
      continue;
    }
    const { entry, fresh } = await entryFor(paths, file, index.get(file));
    if (fresh) changed = true;
    if (entry.key) next.set(file, entry);
    if (entry.head) archives.push(entry.head);
    else invalid.push({ file, cause: entry.cause ?? 'invalid' });
  }
  if (changed || next.size !== index.size) remember(paths, next);
  archives.sort((a, b) => b.saved_at - a.saved_at);
  return { archives, invalid, index: next };
}

/** Heads newest first; invalid files are skipped and returned separately for doctor. */
export async function listArchives(
  paths: Pick<StorePaths, 'archives'>,
): Promise<{ archives: ArchiveHead[]; invalid: InvalidFile[] }> {
  const { archives, invalid } = await scanArchives(paths);
  return { archives, invalid };
}

/** What this listing parsed, kept for this process's next one (the file is not rewritten by a read). */
function remember(paths: Pick<StorePaths, 'archives'>, index: Index) {
  const kept = readIndexes.get(paths.archives);
  if (kept) kept.index = new Map(index);
  else readIndexes.set(paths.archives, { key: keyOrNone(join(paths.archives, INDEX_FILE)), index: new Map(index) });
}

/** Rewrites the index after an archive was written or removed. Best effort: the archive itself
 *  is what counts, and a missing or stale index only costs the next listing a parse. */
async function writeIndex(paths: Pick<StorePaths, 'archives'>): Promise<void> {
  try {
    const { index } = await scanArchives(paths);
    await writeAtomic(join(paths.archives, INDEX_FILE), JSON.stringify(Object.fromEntries(index)), {
      tmpPrefix: '.index',
    });
  } catch {
    // the next listing parses what the index lacks
  }
}

/** The newest archive (by saved_at) whose name matches case-insensitively; only that one is read whole. */
export async function findArchiveByName(paths: Pick<StorePaths, 'archives'>, name: string): Promise<Archive | null> {
  const head = archiveNamed((await listArchives(paths)).archives, name);
  return head ? readArchive(paths, head.channel_id) : null;
}

/** false for a bad id or a missing file. */
export async function deleteArchive(paths: Pick<StorePaths, 'archives'>, id: string): Promise<boolean> {
  if (!isArchiveId(id)) return false;
  try {
    storeFs.unlinkSync(archiveFile(paths, id));
    await writeIndex(paths);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}
