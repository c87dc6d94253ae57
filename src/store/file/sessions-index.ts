// The sessions index, `.opencomms/sessions.json`: what the session reads show of the live state
// (the channels, and which members have mail queued or in flight), with the snapshot and journal
// position it reflects, on its first line; then the mail it was computed from (each live
// envelope's channel, recipient and status, and the queues), parsed only when journal lines
// since touch the mail. A fresh process (a CLI read) answers from it plus those lines,
// instead of loading and validating the whole state. It is a cache: it is used only while
// state.json is the very file it names (or the one a compaction seal at the end of its journal
// names) and the journal still holds the bytes it read up to; anything else (missing, unparsable,
// another snapshot, a cut or broken journal) is a full load, which writes it again. Written whole
// by rename, so a reader never sees half of one.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyOps, type Op } from '../../protocol/draft.ts';
import type { Channel, Envelope, MailFields, SessionsState } from '../../protocol/schema.ts';
import { writeAtomicSync } from './atomic.ts';
import { FILE_KEY_FIELDS, sameKey, statKey, type FileKey } from './file-key.ts';
import { journalFile, readJournal, sealOf, type Entry } from './journal.ts';
import type { StorePaths } from '../paths.ts';

const INDEX_FILE = 'sessions.json';
const VERSION = 2;
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

/** The mail the working flags are computed from. */
export interface Mail {
  messages: Readonly<Record<string, MailFields>>;
  queues: Readonly<Record<string, readonly string[]>>;
}

/** The index as read: `mail` stays the bytes it was written as until a journal line touches it. */
interface Indexed {
  channels: Record<string, Channel>;
  working: Set<string>;
  mail: Buffer | { messages: Record<string, MailFields>; queues: Record<string, string[]> };
  at: Position;
}

const pair = (channelId: string, sid: string) => `${channelId}\n${sid}`;

/** Members whose agent is Working (operator.md "The console"): mail addressed to them on that
 *  channel is in flight, or their queue holds an envelope of that channel. */
function workingOf(mail: Mail): Set<string> {
  const working = new Set<string>();
  const { messages, queues } = mail;
  for (const id in messages) {
    const e = messages[id]!;
    if (e.delivery_status === 'in_flight') working.add(pair(e.channel_id, e.recipient_session_id));
  }
  for (const sid in queues)
    for (const id of queues[sid]!) {
      const e = messages[id];
      if (e) working.add(pair(e.channel_id, sid));
    }
  return working;
}

const viewOf = (x: Indexed): SessionsState => ({
  channels: x.channels,
  working: (channelId, sid) => x.working.has(pair(channelId, sid)),
});

/** The sessions state as of the index and the journal lines since, the journal bytes read past
 *  the index, and what to write should the caller keep it; null when only a full load can answer. */
export function readSessionsIndex(
  paths: StorePaths,
): { state: SessionsState; behind: number; write: () => void } | null {
  const x = parse(paths);
  if (!x) return null;
  let behind = 0;
  const found = () => ({
    state: viewOf(x),
    behind,
    write: () => writeIndex(paths, x.channels, x.working, x.mail, x.at),
  });
  for (let seals = 0; seals <= MAX_SEALS; seals++) {
    const { at } = x;
    const key = statKey(paths.state);
    if (!key) return null;
    if (!at.journalId) return sameKey(key, at.key) ? found() : null;
    const r = readJournal(journalFile(paths, at.journalId), at.offset, at.count + 1, at.tail);
    if (r.kind === 'absent') return sameKey(key, at.key) && at.offset === 0 && !at.created ? found() : null;
    if (r.kind !== 'ok' || !applyEntries(x, r.entries)) return null;
    behind += r.offset - at.offset;
    x.at = { ...at, offset: r.offset, count: at.count + r.entries.length, tail: r.tail };
    const last = r.entries.at(-1);
    const seal = last ? sealOf(last) : null;
    if (!seal) return sameKey(key, x.at.key) ? found() : null;
    // A compaction ended this journal: the state now is the snapshot the seal names.
    x.at = { key: seal.key, journalId: seal.journal, created: true, offset: 0, count: 0, tail: Buffer.alloc(0) };
  }
  return null;
}

/** Writes the index of a state (as a full load left it) at `at`. */
export function writeSessionsIndex(
  paths: StorePaths,
  state: { channels: Readonly<Record<string, Channel>> } & Mail,
  at: Position,
): void {
  writeIndex(paths, state.channels, workingOf(state), state, at);
}

/** Best effort: a failed write (a read-only project) only costs the next fresh reader a full load. */
function writeIndex(
  paths: StorePaths,
  channels: Readonly<Record<string, Channel>>,
  working: Set<string>,
  mail: Buffer | Mail,
  at: Position,
): void {
  const body = Buffer.isBuffer(mail) ? mail : Buffer.from(mailText(mail));
  const head = {
    v: VERSION,
    key: Object.fromEntries(FILE_KEY_FIELDS.map((f) => [f, at.key[f].toString()])),
    journal_id: at.journalId,
    created: at.created,
    offset: at.offset,
    count: at.count,
    tail: at.tail.toString('hex'),
    channels,
    working: [...working].map((p) => p.split('\n')),
    mail_bytes: body.length,
  };
  try {
    writeAtomicSync(join(paths.dir, INDEX_FILE), Buffer.concat([Buffer.from(`${JSON.stringify(head)}\n`), body]), {
      tmpPrefix: '.sessions',
      delays: [],
    });
  } catch {
    // see above
  }
}

/** Envelopes grouped by their mail fields (a group's ids share one object when read back), and
 *  the queues. */
function mailText(mail: Mail): string {
  const groups = new Map<string, [string, string, string, string[]]>();
  for (const id in mail.messages) {
    const e = mail.messages[id]!;
    const k = `${e.channel_id}\n${e.recipient_session_id}\n${e.delivery_status}`;
    const g = groups.get(k);
    if (g) g[3].push(id);
    else groups.set(k, [e.channel_id, e.recipient_session_id, e.delivery_status, [id]]);
  }
  return JSON.stringify({ groups: [...groups.values()], queues: mail.queues });
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** The index as written, or null for anything else (no file, torn by a disk, another version). */
function parse(paths: StorePaths): Indexed | null {
  let doc: Record<string, unknown>;
  let body: Buffer;
  try {
    const bytes = readFileSync(join(paths.dir, INDEX_FILE));
    const nl = bytes.indexOf(10);
    if (nl < 0) return null;
    const raw: unknown = JSON.parse(bytes.toString('utf8', 0, nl));
    if (!isObj(raw) || raw.v !== VERSION) return null;
    doc = raw;
    body = bytes.subarray(nl + 1);
  } catch {
    return null;
  }
  const { key: k, journal_id: journalId, created, offset, count, tail, channels, working, mail_bytes } = doc;
  if (!isObj(k) || !isObj(channels) || !Array.isArray(working) || mail_bytes !== body.length) return null;
  if (!(journalId === null || typeof journalId === 'string') || typeof created !== 'boolean') return null;
  if (!isCount(offset) || !isCount(count) || typeof tail !== 'string' || !/^([0-9a-f]{2})*$/.test(tail)) return null;
  const key = {} as FileKey;
  for (const f of FILE_KEY_FIELDS) {
    const v = k[f];
    if (typeof v !== 'string' || !/^\d{1,30}$/.test(v)) return null;
    key[f] = BigInt(v);
  }
  const pairs = new Set<string>();
  for (const p of working as unknown[]) {
    if (!isStrings(p) || p.length !== 2) return null;
    pairs.add(pair(p[0]!, p[1]!));
  }
  return {
    channels: channels as Record<string, Channel>,
    working: pairs,
    mail: body,
    at: { key, journalId, created, offset, count, tail: Buffer.from(tail, 'hex') },
  };
}

/** The mail as written, or null when it is malformed. */
function parseMail(bytes: Buffer): Exclude<Indexed['mail'], Buffer> | null {
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString('utf8'));
  } catch {
    return null;
  }
  if (!isObj(raw) || !Array.isArray(raw.groups) || !isObj(raw.queues)) return null;
  const messages: Record<string, MailFields> = {};
  for (const g of raw.groups as unknown[]) {
    if (!Array.isArray(g) || g.length !== 4 || !isStrings(g[3])) return null;
    const fields = mailOf({ channel_id: g[0], recipient_session_id: g[1], delivery_status: g[2] });
    if (!fields) return null;
    Object.freeze(fields); // shared by the group: a change replaces it (applyEntries)
    for (const id of g[3]) messages[id] = fields;
  }
  for (const sid in raw.queues) if (!isStrings(raw.queues[sid])) return null;
  return { messages, queues: raw.queues as Record<string, string[]> };
}

const MAIL_FIELDS = new Set<string>(['channel_id', 'recipient_session_id', 'delivery_status']);

const mailOf = (e: unknown): MailFields | null => {
  if (!isObj(e)) return null;
  const { channel_id, recipient_session_id, delivery_status } = e as Partial<Envelope>;
  if (typeof channel_id !== 'string' || typeof recipient_session_id !== 'string' || typeof delivery_status !== 'string')
    return null;
  return { channel_id, recipient_session_id, delivery_status };
};

/** Journal entries applied: channels as the store applies them; when one touches the mail, the
 *  mail parsed, envelopes cut to their mail fields and the working flags computed again; the rest
 *  skipped. false when an entry does not fit the state as indexed (the full load then judges it). */
function applyEntries(x: Indexed, entries: readonly Entry[]): boolean {
  const touches = entries.some((e) => e.ops.some((op) => op[1][0] === 'messages' || op[1][0] === 'queues'));
  if (touches && Buffer.isBuffer(x.mail)) {
    const mail = parseMail(x.mail);
    if (!mail) return false;
    x.mail = mail;
  }
  try {
    for (const entry of entries) if (!applyOpsTo(x, entry.ops as Op[])) return false;
  } catch {
    return false;
  }
  if (touches) x.working = workingOf(x.mail as Mail);
  return true;
}

function applyOpsTo(x: Indexed, ops: readonly Op[]): boolean {
  for (const op of ops) {
    const [collection, id, field] = op[1];
    if (collection === 'channels') {
      applyOps(x, [op]);
      continue;
    }
    if (collection !== 'messages' && collection !== 'queues') continue;
    const mail = x.mail as Exclude<Indexed['mail'], Buffer>;
    if (collection === 'queues') {
      applyOps(mail, [op]);
      continue;
    }
    if (id === undefined) return false;
    if (field === undefined) {
      if (op[0] === 'd') delete mail.messages[id];
      else if (op[0] === 's' && mailOf(op[2])) mail.messages[id] = mailOf(op[2])!;
      else return false;
      continue;
    }
    const e = mail.messages[id];
    if (!e) return false;
    if (!MAIL_FIELDS.has(field)) continue;
    if (op[0] !== 's' || op[1].length !== 3 || typeof op[2] !== 'string') return false;
    mail.messages[id] = { ...e, [field]: op[2] };
  }
  return true;
}
