// `opencomms store migrate --to <url>`: a project's files moved into a PostgreSQL project in one
// transaction (the state as one snapshot, every channel's history in order, every archive), under
// the file lock so that no file writer changes them meanwhile; then counted back from the server,
// and only then is the binding written. The binding retires the files: a process that still has
// them open refuses its next write (FileStore checks it under the lock), so there is never a
// second live copy.
import { readdirSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import pg from './pg.ts';
import { RefusalError, refuse } from '../../protocol/result.ts';
import type { Envelope, State } from '../../protocol/schema.ts';
import { listArchives } from '../archives.ts';
import { readBinding, writeBinding } from '../binding.ts';
import { readHistory } from '../history-log.ts';
import { withLock } from '../lock.ts';
import { resolvePaths, type StorePaths } from '../paths.ts';
import { FileStore } from '../store.ts';
import { asRefusal, clientConfig, describeUrl } from './connect.ts';
import { Mailbox } from './mailbox.ts';
import { fillMailboxSql, ident, schemaOf } from './schema.ts';
import { PgStore } from './store.ts';

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
  schemaOf(key);
  const paths = resolvePaths(projectDir);
  const where = `${describeUrl(url)}#${key}`;
  // The target's layout, created (or its version checked) by a store's first query.
  const target = new PgStore({ url, key });
  try {
    if ((await target.revision()) !== '0')
      throw new RefusalError(
        refuse('invalid_argument', `${where} already holds a project: choose another key; nothing was moved.`),
      );
  } finally {
    await target.close();
  }
  return withLock(paths, async () => {
    const file = new FileStore(projectDir);
    const state = await file.read();
    await file.close();
    const logs = histories(paths);
    for (const id of logs.keys())
      logs.set(id, (await readHistory(paths, id, { limit: Number.MAX_SAFE_INTEGER })).reverse());
    const { archives } = await listArchives(paths);
    await copy(url, key, state, logs, archives);
    const moved = await verify(url, key, state, logs, archives.length);
    await writeBinding(projectDir, url, key);
    return moved;
  });
}

async function copy(url: string, key: string, state: State, logs: Map<string, Envelope[]>, archives: unknown[]) {
  const s = ident(schemaOf(key));
  const c = new pg.Client(clientConfig(url));
  try {
    await c.connect();
    await c.query('begin');
    const head = await c.query<{ seq: string }>(`select seq from ${s}.head for update`);
    if (Number(head.rows[0]?.seq) !== 0)
      throw new RefusalError(
        refuse(
          'invalid_argument',
          `${describeUrl(url)}#${key} already holds a project: choose another key; nothing was moved.`,
        ),
      );
    await c.query({ text: `insert into ${s}.snapshots values (1, $1)`, values: [JSON.stringify(state)] });
    await c.query(`update ${s}.head set seq = 1`);
    await c.query({
      text: fillMailboxSql(schemaOf(key)),
      values: [JSON.stringify([...Mailbox.of(state).rows.values()])],
    });
    for (const log of logs.values())
      if (log.length)
        await c.query({
          text: `insert into ${s}.history (channel_id, message_id, envelope) select e->>'channel_id', e->>'message_id', e from jsonb_array_elements($1::jsonb) e`,
          values: [JSON.stringify(log)],
        });
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

/** Reads the moved project back through a store and compares it with what was read from files. */
async function verify(
  url: string,
  key: string,
  state: State,
  logs: Map<string, Envelope[]>,
  archiveCount: number,
): Promise<Moved> {
  const moved = new PgStore({ url, key });
  try {
    const got = await moved.read();
    if (!isDeepStrictEqual(got, structuredClone(state)))
      throw new Error('the state read back from PostgreSQL differs from the files');
    let history = 0;
    for (const [id, log] of logs) {
      const n = (await moved.historyIds(id)).size;
      if (n !== log.length) throw new Error(`channel ${id}: ${n} history entries read back, ${log.length} moved`);
      history += n;
    }
    const archives = (await moved.archives()).archives.length;
    if (archives !== archiveCount) throw new Error(`${archives} archives read back, ${archiveCount} moved`);
    return {
      channels: Object.keys(state.channels).length,
      messages: Object.keys(state.messages).length,
      history,
      archives,
    };
  } finally {
    await moved.close();
  }
}
