// Saved-session archives, `archives/<channel_id>.json` (FEATURES.md §2.6). Ids are checked
// against ARCHIVE_ID_RE before any path is built from one.
import { readFileSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isArchiveId } from '../protocol/ids.ts';
import { ArchiveSchema, type Archive, type ArchiveInput } from '../protocol/archive.ts';
export { ArchiveSchema, type Archive, type ArchiveInput };
import { writeAtomic, writeAtomicSync } from './atomic.ts';
import { makeDir, storeFs } from './fs.ts';
import type { StorePaths } from './paths.ts';

export interface InvalidFile {
  file: string;
  cause: string;
}

const archiveFile = (paths: Pick<StorePaths, 'archives'>, id: string) => join(paths.archives, `${id}.json`);

/** Writes an archive; returns what takes it back (the state write that follows failed: the
 *  channel is still live, and a failed operation leaves no trace), which puts back the file it
 *  replaced, if any. */
export async function writeArchive(paths: Pick<StorePaths, 'archives'>, archive: ArchiveInput, durable = false): Promise<() => void> {
  if (!isArchiveId(archive.channel_id)) throw new Error(`archive: invalid channel id ${JSON.stringify(archive.channel_id)}`);
  const parsed = ArchiveSchema.parse(archive); // never write a file the reader would skip
  const file = archiveFile(paths, parsed.channel_id);
  makeDir(paths.archives, durable);
  const before = previous(file);
  await writeAtomic(file, `${JSON.stringify(parsed, null, 2)}\n`, { tmpPrefix: '.arch', durable });
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
  if (r.data.channel_id !== id) return { ok: false, cause: `channel_id ${r.data.channel_id} does not match the file name` };
  return { ok: true, archive: r.data };
}

/** null for a bad id, a missing file or an invalid one. */
export async function readArchive(paths: Pick<StorePaths, 'archives'>, id: string): Promise<Archive | null> {
  if (!isArchiveId(id)) return null;
  const r = await load(paths, id);
  return r.ok ? r.archive : null;
}

/** Newest first; invalid files are skipped and returned separately for doctor. */
export async function listArchives(
  paths: Pick<StorePaths, 'archives'>,
): Promise<{ archives: Archive[]; invalid: InvalidFile[] }> {
  let names: string[];
  try {
    names = await readdir(paths.archives);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { archives: [], invalid: [] };
    throw e;
  }
  const archives: Archive[] = [];
  const invalid: InvalidFile[] = [];
  for (const file of names.filter((n) => n.endsWith('.json')).sort()) {
    const id = file.slice(0, -'.json'.length);
    if (!isArchiveId(id)) {
      invalid.push({ file, cause: 'file name is not an archive id' });
      continue;
    }
    const r = await load(paths, id);
    if (r.ok) archives.push(r.archive);
    else invalid.push({ file, cause: r.cause });
  }
  archives.sort((a, b) => b.saved_at - a.saved_at);
  return { archives, invalid };
}

/** The newest archive (by saved_at) whose name matches case-insensitively. */
export async function findArchiveByName(paths: Pick<StorePaths, 'archives'>, name: string): Promise<Archive | null> {
  const wanted = name.trim().toLowerCase();
  const { archives } = await listArchives(paths);
  return archives.find((a) => a.name.toLowerCase() === wanted) ?? null;
}

/** false for a bad id or a missing file. */
export async function deleteArchive(paths: Pick<StorePaths, 'archives'>, id: string): Promise<boolean> {
  if (!isArchiveId(id)) return false;
  try {
    storeFs.unlinkSync(archiveFile(paths, id));
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}
