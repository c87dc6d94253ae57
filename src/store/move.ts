// `opencomms store migrate --to <url>`: a project's files moved into a PostgreSQL project in one
// transaction (the state as one snapshot, every channel's history in order, every archive), under
// the file lock so that no file writer changes them meanwhile; then counted back from the server,
// and only then is the binding written. The binding retires the files: a process that still has
// them open refuses its next write (FileStore checks it under the lock), so there is never a
// second live copy. `--to file` moves it back the same way: the PostgreSQL project is held under
// its head lock while the files are written and read back, and is marked retired in the same
// transaction, so every process still pointing at it refuses from then on.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import pg from './postgres/pg.ts';
import { RefusalError, refuse } from '../protocol/result.ts';
import type { Envelope, State } from '../protocol/schema.ts';
import type { Archive } from '../protocol/archive.ts';
import { listArchives, readArchive, writeArchive } from './file/archives.ts';
import { writeAtomic } from './file/atomic.ts';
import { readBinding, writeBinding } from './binding.ts';
import { appendHistory, closeHistoryLogs, readHistory } from './file/history-log.ts';
import { withLock } from './file/lock.ts';
import { ensureDir, resolvePaths, type StorePaths } from './paths.ts';
import { serialize } from './file/state-file.ts';
import { FileStore } from './file/store.ts';
import { asRefusal, clientConfig, describeUrl, retired } from './postgres/connect.ts';
import { Mailbox } from './postgres/mailbox.ts';
import { probeTarget } from './postgres/preflight.ts';
import {
  PG_LAYOUT,
  fillMailboxSql,
  historyBatches,
  historyEnvelopes,
  ident,
  insertHistorySql,
  layoutSql,
  schemaOf,
} from './postgres/schema.ts';
import { PgStore } from './postgres/store.ts';
import type { Store } from './types.ts';

export interface Moved {
  channels: number;
  messages: number;
  history: number;
  archives: number;
}

/** Every channel's history, oldest first (one line per message id, as readers see it). */
function histories(paths: StorePaths): Map<string, Envelope[]> {
  let files: string[] = [];
  try {
    files = readdirSync(paths.history).filter((f) => f.endsWith('.jsonl'));
  } catch {
    // no history yet
  }
  return new Map(files.map((f) => [f.slice(0, -'.jsonl'.length), [] as Envelope[]]));
}

export async function moveToPostgres(projectDir: string, url: string, key: string): Promise<Moved> {
  if (readBinding(projectDir).kind !== 'file')
    throw new RefusalError(
      refuse('invalid_argument', 'This project is not on the file store: `opencomms store status` shows where it is.'),
    );
  // Everything that can refuse is checked before a row is written (preflight.ts): the URL, the
  // server, TLS, credentials, the grant, and that the key holds no project, live or retired.
  const found = await probeTarget(url, key);
  const paths = resolvePaths(projectDir);
  if (found.retired !== null || found.head !== 0) throw taken(url, key, found.retired);
  if (found.layout !== null && found.layout < PG_LAYOUT) {
    // An empty project of an older layout: a store's first query brings it to this one.
    const target = new PgStore({ url, key });
    try {
      await target.revision();
    } finally {
      await target.close();
    }
  }
  return withLock(paths, async () => {
    const file = new FileStore(projectDir);
    const state = await file.read();
    await file.close();
    const logs = histories(paths);
    for (const id of logs.keys())
      logs.set(id, (await readHistory(paths, id, { limit: Number.MAX_SAFE_INTEGER })).reverse());
    // The listing gives heads; the archive is moved whole (its messages too).
    const archives: Archive[] = [];
    for (const head of (await listArchives(paths)).archives) {
      const a = await readArchive(paths, head.channel_id);
      if (a) archives.push(a);
    }
    await copy(url, key, state, logs, archives);
    const moved = await readBack(
      new PgStore({ url, key }),
      state,
      logs,
      archives.length,
      'the state read back from PostgreSQL differs from the files',
    );
    await writeBinding(projectDir, url, key);
    return moved;
  });
}

/** The refusal of a key that holds a project already (a retired one stays taken). */
const taken = (url: string, key: string, retiredTo: string | null) =>
  new RefusalError(
    refuse(
      'invalid_argument',
      `${describeUrl(url)}#${key} already holds a project${retiredTo ? ` (retired: it moved to ${retiredTo})` : ''}: choose another key; nothing was moved.`,
      { field: 'key', code: retiredTo ? 'key_retired' : 'key_taken' },
    ),
  );

async function copy(url: string, key: string, state: State, logs: Map<string, Envelope[]>, archives: unknown[]) {
  const s = ident(schemaOf(key));
  const c = new pg.Client(clientConfig(url));
  try {
    await c.connect();
    await c.query('begin');
    // Laid out in this transaction when the key is new, so that a failure leaves no schema behind.
    await c.query(`select pg_advisory_xact_lock(hashtext('opencomms:${schemaOf(key)}'))`);
    const laid = await c.query<{ laid: boolean }>(`select to_regclass('${s}.meta') is not null as laid`);
    if (!laid.rows[0]?.laid) await c.query(layoutSql(schemaOf(key)));
    const head = await c.query<{ seq: string; retired: string | null }>(
      `select seq, retired from ${s}.head for update`,
    );
    if (Number(head.rows[0]?.seq) !== 0 || head.rows[0]?.retired) throw taken(url, key, head.rows[0]?.retired ?? null);
    await c.query({ text: `insert into ${s}.snapshots values (1, $1)`, values: [JSON.stringify(state)] });
    await c.query(`update ${s}.head set seq = 1`);
    await c.query({
      text: fillMailboxSql(schemaOf(key)),
      values: [JSON.stringify([...Mailbox.of(state).rows.values()])],
    });
    for (const log of logs.values())
      if (log.length) {
        const b = historyBatches(log);
        await c.query({
          text: insertHistorySql(schemaOf(key), ['$1::text[]', '$2::int[]', '$3::text[]', '$4::text[]']),
          values: [b.channels, b.counts, b.ids, b.envelopes],
        });
      }
    for (const a of archives)
      await c.query({
        text: `insert into ${s}.archives select a->>'channel_id', a->>'name', (a->>'saved_at')::bigint, a from (select $1::jsonb as a) x`,
        values: [JSON.stringify(a)],
      });
    await c.query('commit');
  } catch (e) {
    await c.query('rollback').catch(() => {});
    throw asRefusal(e, describeUrl(url));
  } finally {
    await c.end().catch(() => {});
  }
}

/** Reads a moved project back through a store of its new kind and compares it with what was
 *  moved: the state whole, each channel's history by its ids (a log may hold an envelope twice,
 *  appended again after a crash before its state; every store reads it once), the archives by
 *  count. Closes the store. */
async function readBack(
  store: Store,
  state: State,
  logs: Map<string, Envelope[]>,
  archiveCount: number,
  differs: string,
): Promise<Moved> {
  try {
    if (!isDeepStrictEqual(await store.read(), structuredClone(state))) throw new Error(differs);
    let history = 0;
    for (const [id, log] of logs) {
      const n = (await store.historyIds(id)).size;
      const want = new Set(log.map((e) => e.message_id)).size;
      if (n !== want) throw new Error(`channel ${id}: ${n} history entries read back, ${want} moved`);
      history += n;
    }
    const archives = (await store.archives()).archives.length;
    if (archives !== archiveCount) throw new Error(`${archives} archives read back, ${archiveCount} moved`);
    return {
      channels: Object.keys(state.channels).length,
      messages: Object.keys(state.messages).length,
      history,
      archives,
    };
  } finally {
    await store.close();
  }
}

/** What `--to file` reads from the held PostgreSQL project: its head, history and archives. */
interface Held {
  seq: number;
  logs: Map<string, Envelope[]>;
  archives: Archive[];
}

/** The files of the project that the binding retired, set aside (never deleted) so that the
 *  files written next are the project's only live copy; the folder they went to, or null. */
function setAside(paths: StorePaths): string | null {
  const names = [paths.state, paths.journal, paths.history, paths.archives].filter((f) => existsSync(f));
  if (!names.length) return null;
  closeHistoryLogs(paths);
  const dir = join(paths.dir, `retired-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  mkdirSync(dir);
  for (const f of names) renameSync(f, join(dir, f.slice(paths.dir.length + 1)));
  return dir.slice(paths.project.length + 1);
}

/** Takes the project's head lock (no process can commit until this transaction ends) and reads,
 *  in the transaction's one snapshot, the head, every history entry in order and every archive. */
async function hold(c: pg.Client, key: string, where: string): Promise<Held> {
  const s = ident(schemaOf(key));
  const none = () => new RefusalError(refuse('invalid_argument', `${where} holds no project: nothing was moved.`));
  const there = await c.query<{ ok: boolean }>(`select to_regclass('${s}.head') is not null as ok`);
  if (!there.rows[0]?.ok) throw none();
  await c.query('begin isolation level repeatable read');
  const head = await c.query<{ seq: string; retired: string | null }>(`select seq, retired from ${s}.head for update`);
  const row = head.rows[0];
  if (!row) throw none();
  if (row.retired) throw new RefusalError(retired(where, row.retired));
  const logs = new Map<string, Envelope[]>();
  const h = await c.query<{ envelope: Envelope }>(
    `select x.envelope from ${historyEnvelopes(schemaOf(key))} order by h.n, x.i`,
  );
  for (const { envelope } of h.rows) {
    const log = logs.get(envelope.channel_id);
    if (log) log.push(envelope);
    else logs.set(envelope.channel_id, [envelope]);
  }
  const a = await c.query<{ archive: Archive }>(`select archive from ${s}.archives order by saved_at`);
  return { seq: Number(row.seq), logs, archives: a.rows.map((r) => r.archive) };
}

/** The state at the held head, read by a store as any process reads it (snapshot and changes). */
async function stateAt(url: string, key: string, seq: number): Promise<State> {
  const store = new PgStore({ url, key });
  try {
    const state = await store.read();
    if ((await store.revision()) !== String(seq))
      throw new Error(`the state read is not at change ${seq}, which this migration holds`);
    return state;
  } finally {
    await store.close();
  }
}

async function writeFiles(paths: StorePaths, state: State, held: Held) {
  for (const log of held.logs.values()) appendHistory(paths, log);
  closeHistoryLogs(paths);
  for (const a of held.archives) await writeArchive(paths, a);
  // The state last: until it exists, a reader of these files finds no project at all.
  await writeAtomic(paths.state, serialize(state), { tmpPrefix: '.state' });
}

/** `store migrate --to file`: the bound PostgreSQL project written into this folder's files,
 *  read back and compared; then, in the transaction that held it, marked retired (with where it
 *  went), and only then is the binding removed. A failure before the commit leaves the project
 *  live in PostgreSQL and the folder bound to it (the files written stay retired under the
 *  binding and are set aside by the next attempt). */
export async function moveToFiles(projectDir: string): Promise<Moved & { set_aside: string | null }> {
  const b = readBinding(projectDir);
  if (b.kind !== 'postgres')
    throw new RefusalError(refuse('invalid_argument', 'This project is on the file store already: nothing to move.'));
  const paths = resolvePaths(projectDir);
  const where = `${describeUrl(b.url)}#${b.key}`;
  await ensureDir(paths);
  return withLock(paths, async () => {
    // This transaction holds the project's lock on purpose while the files are written and read
    // back between its statements: the server's bound on an idle transaction does not apply.
    const c = new pg.Client({ ...clientConfig(b.url), idle_in_transaction_session_timeout: 0 });
    try {
      await c.connect();
      const held = await hold(c, b.key, where);
      const state = await stateAt(b.url, b.key, held.seq);
      const setAsideTo = setAside(paths);
      await writeFiles(paths, state, held);
      const moved = await readBack(
        new FileStore(projectDir),
        state,
        held.logs,
        held.archives.length,
        'the state read back from the files differs from PostgreSQL',
      );
      const schema = schemaOf(b.key);
      await c.query({
        text: `update ${ident(schema)}.head set retired = $1`,
        values: [`the files at ${hostname()}:${paths.project}`],
      });
      // Listeners look again, and find the project retired.
      await c.query(`select pg_notify('${schema}', '${held.seq + 1} a')`);
      await c.query('commit');
      rmSync(paths.binding);
      return { ...moved, set_aside: setAsideTo };
    } catch (e) {
      await c.query('rollback').catch(() => {});
      throw asRefusal(e, where);
    } finally {
      await c.end().catch(() => {});
    }
  });
}
