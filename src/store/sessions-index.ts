// The sessions index, `.opencomms/sessions.json`: what the session reads need of the live state
// (channels, queues, and per live envelope its channel, recipient and status), with the snapshot
// and journal position it reflects. A fresh process (a CLI read) answers from it plus the journal
// lines appended since, instead of loading and validating the whole state. It is a cache: it is
// used only while state.json is the very file it names (or the one a compaction seal at the end of
// its journal names) and the journal still holds the bytes it read up to; anything else (missing,
// unparsable, another snapshot, a cut or broken journal) is a full load, which writes it again.
// Written whole by rename, so a reader never sees half of one.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyOps, type Op } from '../protocol/draft.ts';
import type { Channel, Envelope, MailFields, SessionsState } from '../protocol/schema.ts';
import { writeAtomicSync } from './atomic.ts';
import { FILE_KEY_FIELDS, sameKey, statKey, type FileKey } from './file-key.ts';
import { journalFile, readJournal, sealOf, type Entry } from './journal.ts';
import type { StorePaths } from './paths.ts';

const INDEX_FILE = 'sessions.json';
const VERSION = 1;
/** Compaction seals followed in one read before it gives up and loads (each one is a snapshot
 *  written while this read ran). */
const MAX_SEALS = 3;

/** Where in the files a sessions state stands: state.json's identity, the journal that continues
 *  it, and how far into that journal (offset, entries, the bytes before the offset: journal.ts). */
export interface Position {
  key: FileKey;
  journalId: string | null;
  created: boolean;
  offset: number;
  count: number;
  tail: Buffer;
}

interface Indexed {
  state: { channels: Record<string, Channel>; queues: Record<string, string[]>; messages: Record<string, MailFields> };
  at: Position;
}

/** The file's sessions state brought up to date with the journal, and the journal bytes read past
 *  the index; null when only a full load can answer. */
export function readSessionsIndex(paths: StorePaths): { state: SessionsState; at: Position; behind: number } | null {
  const indexed = parse(paths);
  if (!indexed) return null;
  let { at } = indexed;
  let behind = 0;
  for (let seals = 0; seals <= MAX_SEALS; seals++) {
    const key = statKey(paths.state);
    if (!key) return null;
    if (!at.journalId) return sameKey(key, at.key) ? { state: indexed.state, at, behind } : null;
    const r = readJournal(journalFile(paths, at.journalId), at.offset, at.count + 1, at.tail);
    if (r.kind === 'absent')
      return sameKey(key, at.key) && at.offset === 0 && !at.created ? { state: indexed.state, at, behind } : null;
    if (r.kind !== 'ok') return null;
    if (!r.entries.every((e) => applyEntry(indexed.state, e))) return null;
    behind += r.offset - at.offset;
    at = { ...at, offset: r.offset, count: at.count + r.entries.length, tail: r.tail };
    const last = r.entries.at(-1);
    const seal = last ? sealOf(last) : null;
    if (!seal) return sameKey(key, at.key) ? { state: indexed.state, at, behind } : null;
    // A compaction ended this journal: the state now is the snapshot the seal names.
    at = { key: seal.key, journalId: seal.journal, created: true, offset: 0, count: 0, tail: Buffer.alloc(0) };
  }
  return null;
}

/** Writes the index for `state` as it stands at `at`. Best effort: a failed write (a read-only
 *  project) only costs the next fresh reader a full load. */
export function writeSessionsIndex(paths: StorePaths, state: SessionsState, at: Position): void {
  // Envelopes grouped by their mail fields: a group's ids share one object when read back.
  const groups = new Map<string, [string, string, string, string[]]>();
  for (const id in state.messages) {
    const e = state.messages[id]!;
    const k = `${e.channel_id}\n${e.recipient_session_id}\n${e.delivery_status}`;
    const g = groups.get(k);
    if (g) g[3].push(id);
    else groups.set(k, [e.channel_id, e.recipient_session_id, e.delivery_status, [id]]);
  }
  const doc = {
    v: VERSION,
    key: Object.fromEntries(FILE_KEY_FIELDS.map((f) => [f, at.key[f].toString()])),
    journal_id: at.journalId,
    created: at.created,
    offset: at.offset,
    count: at.count,
    tail: at.tail.toString('hex'),
    channels: state.channels,
    queues: state.queues,
    mail: [...groups.values()],
  };
  try {
    writeAtomicSync(join(paths.dir, INDEX_FILE), JSON.stringify(doc), { tmpPrefix: '.sessions', delays: [] });
  } catch {
    // see above
  }
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** The index as written, or null for anything else (no file, torn by a disk, another version). */
function parse(paths: StorePaths): Indexed | null {
  let doc: Record<string, unknown>;
  try {
    const raw: unknown = JSON.parse(readFileSync(join(paths.dir, INDEX_FILE), 'utf8'));
    if (!isObj(raw) || raw.v !== VERSION) return null;
    doc = raw;
  } catch {
    return null;
  }
  const { key: k, journal_id: journalId, created, offset, count, tail, channels, queues, mail } = doc;
  if (!isObj(k) || !isObj(channels) || !isObj(queues) || !Array.isArray(mail)) return null;
  if (!(journalId === null || typeof journalId === 'string') || typeof created !== 'boolean') return null;
  if (!isCount(offset) || !isCount(count) || typeof tail !== 'string' || !/^([0-9a-f]{2})*$/.test(tail)) return null;
  const key = {} as FileKey;
  for (const f of FILE_KEY_FIELDS) {
    const v = k[f];
    if (typeof v !== 'string' || !/^\d{1,30}$/.test(v)) return null;
    key[f] = BigInt(v);
  }
  const messages: Record<string, MailFields> = {};
  for (const g of mail as unknown[]) {
    if (!Array.isArray(g) || g.length !== 4 || !Array.isArray(g[3])) return null;
    const fields = mailOf({ channel_id: g[0], recipient_session_id: g[1], delivery_status: g[2] });
    if (!fields) return null;
    Object.freeze(fields); // shared by the group: a change replaces it (applyEntry)
    for (const id of g[3] as unknown[]) {
      if (typeof id !== 'string') return null;
      messages[id] = fields;
    }
  }
  return {
    state: {
      channels: channels as Record<string, Channel>,
      queues: queues as Record<string, string[]>,
      messages,
    },
    at: { key, journalId, created, offset, count, tail: Buffer.from(tail, 'hex') },
  };
}

const MAIL_FIELDS = new Set<string>(['channel_id', 'recipient_session_id', 'delivery_status']);

const mailOf = (e: unknown): MailFields | null => {
  if (!isObj(e)) return null;
  const { channel_id, recipient_session_id, delivery_status } = e as Partial<Envelope>;
  if (typeof channel_id !== 'string' || typeof recipient_session_id !== 'string' || typeof delivery_status !== 'string')
    return null;
  return { channel_id, recipient_session_id, delivery_status };
};

/** One journal entry applied to the sessions state: channels and queues as the store applies
 *  them, envelopes cut to their mail fields, the rest skipped. false when the entry does not fit
 *  the state as indexed (the full load then judges it). */
function applyEntry(state: Indexed['state'], entry: Entry): boolean {
  try {
    for (const op of entry.ops as Op[]) {
      const [collection, id, field] = op[1];
      if (collection === 'channels' || collection === 'queues') {
        applyOps(state, [op]);
        continue;
      }
      if (collection !== 'messages') continue;
      if (id === undefined) return false;
      if (field === undefined) {
        if (op[0] === 'd') delete state.messages[id];
        else if (op[0] === 's' && mailOf(op[2])) state.messages[id] = mailOf(op[2])!;
        else return false;
        continue;
      }
      const mail = state.messages[id];
      if (!mail) return false;
      if (!MAIL_FIELDS.has(field)) continue;
      if (op[0] !== 's' || op[1].length !== 3 || typeof op[2] !== 'string') return false;
      state.messages[id] = { ...mail, [field]: op[2] };
    }
    return true;
  } catch {
    return false;
  }
}
