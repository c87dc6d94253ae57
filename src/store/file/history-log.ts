// Delivered history that left state.json: one append-only JSONL log per channel.
// A crash between append and state save appends an envelope twice; readers keep the last line.
import { open, readFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { isArchiveId } from '../../protocol/ids.ts';
import { EnvelopeSchema } from '../../protocol/schema.ts';
import type { Envelope } from '../../protocol/schema.ts';
import type { StorePaths } from '../paths.ts';
import { endsWithNewline, NL } from './tail.ts';
import { closeQuietly, codeOf, makeDir, openAppend, StoreWriteError, storeFs, writeAll } from './fs.ts';

const CHUNK_BYTES = 64 * 1024;

function logFile(paths: Pick<StorePaths, 'history'>, channelId: string): string {
  if (!isArchiveId(channelId)) throw new Error(`history log: invalid channel id ${JSON.stringify(channelId)}`);
  return join(paths.history, `${channelId}.jsonl`);
}

/** How many logs a process keeps open between appends. A pull touches one log per channel it
 *  takes mail from; a project has a few dozen channels at most, so this covers the busy ones. */
export const MAX_OPEN_LOGS = 32;

/** An open log and its size after this process's last append to it (-1: none yet). */
interface OpenLog {
  fd: number;
  end: number;
}

/** The logs this process appended to, kept open (an open and a close per log cost more than the
 *  append), each with its size after our last append: a log still that size ends with our
 *  newline and needs no read of its last byte, which would cost more than the append itself and
 *  a pull appends to one log per channel. Logs are written under the state lock only, so another size means another process appended or a crash
 *  tore a line. The descriptor keeps its inode: a log deleted under it (another process deleted
 *  the channel) has no link left, and is opened again by name. In least-recently-used order. */
const openLogs = new Map<string, OpenLog>();

/** Appends under the state lock, synchronously: it sits on the hot path of every commit and pull,
 *  where thread-pool hops cost more than the small writes themselves, and nothing else of this
 *  process may run between it and the state write that follows. Returns what takes the lines back
 *  (the state write failed: the envelopes are still live, and a failed operation leaves no
 *  trace); a failed append takes back its own. */
export function appendHistory(
  paths: Pick<StorePaths, 'history'>,
  envelopes: readonly Envelope[],
  durable = false,
): () => void {
  // A pull of 100 from one channel is 100 envelopes for one file: grouped by channel id, each
  // file's name is built and checked once.
  const byChannel = new Map<string, string[]>();
  for (const e of envelopes) {
    const lines = byChannel.get(e.channel_id);
    if (lines) lines.push(JSON.stringify(e));
    else byChannel.set(e.channel_id, [JSON.stringify(e)]);
  }
  const appended: Array<{ file: string; size: number }> = [];
  const undo = () => {
    for (const { file, size } of appended) takeBack(file, size);
  };
  if (byChannel.size === 0) return undo;
  const files = [...byChannel].map(([id, lines]) => [logFile(paths, id), lines] as const); // every id checked before anything is written
  for (const [file, lines] of files) {
    let size = -1;
    try {
      const opened = openForAppend(paths, file, durable);
      size = opened.size;
      const { log } = opened;
      // A torn last line (crash mid-append) must not swallow our first line.
      const torn = size > 0 && size !== log.end && !endsWithNewline(log.fd, size);
      const bytes = Buffer.from(`${torn ? '\n' : ''}${lines.join('\n')}\n`);
      appended.push({ file, size });
      writeAll(log.fd, bytes);
      if (durable) storeFs.fsyncSync(log.fd);
      log.end = size + bytes.length;
    } catch (e) {
      undo();
      closeLog(file);
      throw new StoreWriteError(codeOf(e), 'a history log', e);
    }
  }
  return undo;
}

/** Cuts a log back to `size`. If that fails the lines stay, and readers of history show an
 *  envelope that is also still live, once: they keep one line per message id. */
function takeBack(file: string, size: number) {
  const log = openLogs.get(file);
  try {
    if (log) {
      storeFs.ftruncateSync(log.fd, size);
      log.end = size;
      return;
    }
    const fd = storeFs.openSync(file, 'r+'); // closed since, to keep MAX_OPEN_LOGS
    try {
      storeFs.ftruncateSync(fd, size);
    } finally {
      closeQuietly(fd);
    }
  } catch {
    closeLog(file);
  }
}

/** The log's open descriptor and its size now; opened (its directory made when missing) if this
 *  process has none for it, or the one it has was deleted. */
function openForAppend(
  paths: Pick<StorePaths, 'history'>,
  file: string,
  durable: boolean,
): { log: OpenLog; size: number } {
  const kept = openLogs.get(file);
  if (kept) {
    const st = storeFs.fstatSync(kept.fd);
    openLogs.delete(file);
    if (st.nlink > 0) {
      openLogs.set(file, kept);
      return { log: kept, size: st.size };
    }
    closeQuietly(kept.fd);
  }
  let fd: number;
  try {
    fd = openAppend(file, durable);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    makeDir(paths.history, durable);
    fd = openAppend(file, durable);
  }
  const log: OpenLog = { fd, end: -1 };
  openLogs.set(file, log);
  if (openLogs.size > MAX_OPEN_LOGS) closeLog(openLogs.keys().next().value!);
  return { log, size: storeFs.fstatSync(fd).size };
}

function closeLog(file: string) {
  const log = openLogs.get(file);
  openLogs.delete(file);
  if (log) closeQuietly(log.fd);
}

/** Closes the logs of one project this process keeps open (its store is closing). */
export function closeHistoryLogs(paths: Pick<StorePaths, 'history'>): void {
  const prefix = join(paths.history, '/');
  for (const file of [...openLogs.keys()]) if (file.startsWith(prefix)) closeLog(file);
}

/** Visits the log's envelopes newest first until `visit` returns false. The file is read
 *  backwards in chunks, so the cost follows how far the visit goes, not the log's length. */
async function scanBackwards(
  paths: Pick<StorePaths, 'history'>,
  channelId: string,
  visit: (e: Envelope) => boolean,
): Promise<void> {
  const file = logFile(paths, channelId);
  let fh: FileHandle;
  try {
    fh = await open(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  let going = true;
  const take = (line: Buffer) => {
    let raw: unknown;
    try {
      raw = JSON.parse(line.toString('utf8'));
    } catch {
      return; // torn or blank line
    }
    const r = EnvelopeSchema.safeParse(raw);
    if (r.success) going = visit(r.data);
  };
  try {
    let pos = (await fh.stat()).size;
    let carry = Buffer.alloc(0); // the start of a line whose beginning lies in an earlier chunk
    while (pos > 0 && going) {
      const n = Math.min(CHUNK_BYTES, pos);
      pos -= n;
      const chunk = Buffer.alloc(n);
      await fh.read(chunk, 0, n, pos);
      const data = Buffer.concat([chunk, carry]);
      let end = data.length;
      for (let i = data.length - 1; i >= 0 && going; i--) {
        if (data[i] !== NL) continue;
        take(data.subarray(i + 1, end));
        end = i;
      }
      carry = data.subarray(0, end);
    }
    if (pos === 0 && going) take(carry);
  } finally {
    await fh.close();
  }
}

/** The newest `limit` envelopes, newest first, one per message_id (its last line wins). */
export async function readHistory(
  paths: Pick<StorePaths, 'history'>,
  channelId: string,
  { limit }: { limit: number },
): Promise<Envelope[]> {
  const out: Envelope[] = [];
  if (limit <= 0) return out;
  const seen = new Set<string>();
  await scanBackwards(paths, channelId, (e) => {
    if (!seen.has(e.message_id)) {
      seen.add(e.message_id);
      out.push(e);
    }
    return out.length < limit;
  });
  return out;
}

/** One envelope by id among the newest `maxScan` lines (replies name recent messages). */
export async function findInHistory(
  paths: Pick<StorePaths, 'history'>,
  channelId: string,
  messageId: string,
  maxScan: number,
): Promise<Envelope | null> {
  let found: Envelope | null = null;
  let scanned = 0;
  await scanBackwards(paths, channelId, (e) => {
    if (e.message_id === messageId) found = e;
    return found === null && ++scanned < maxScan;
  });
  return found;
}

/** Every distinct message id in a channel's log (a saved channel's message_count counts all of
 *  them, not only the newest the archive keeps). Lines are parsed as JSON only, without the
 *  envelope schema: an id is all this needs. */
export async function historyIds(paths: Pick<StorePaths, 'history'>, channelId: string): Promise<Set<string>> {
  const ids = new Set<string>();
  let text: string;
  try {
    text = await readFile(logFile(paths, channelId), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return ids;
    throw e;
  }
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      const id = (JSON.parse(line) as { message_id?: unknown }).message_id;
      if (typeof id === 'string') ids.add(id);
    } catch {
      // a torn line: its envelope is written again whole, or is still live
    }
  }
  return ids;
}

export async function deleteHistory(paths: Pick<StorePaths, 'history'>, channelId: string): Promise<void> {
  const file = logFile(paths, channelId);
  closeLog(file);
  try {
    storeFs.unlinkSync(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}
