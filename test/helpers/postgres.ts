// The PostgreSQL of the store tests (test/helpers/pg-global-setup.ts provides it) and a fresh
// project key per test, so that tests never share rows. Never skipped: no server is a failure.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { MailboxRow } from '../../src/store/postgres/mailbox.ts';
import { mailboxRowJson } from '../../src/store/postgres/schema.ts';

export function testDatabaseUrl(): string {
  const url = process.env.OPENCOMMS_TEST_DATABASE_URL;
  if (!url)
    throw new Error('OPENCOMMS_TEST_DATABASE_URL is not set: the global setup (vitest.config.ts) starts a PostgreSQL');
  return url;
}

export const newProjectKey = (prefix = 't') => `${prefix}_${randomBytes(6).toString('hex')}`;

/** Runs SQL as the test server's administrator. */
export async function admin<T>(fn: (c: pg.Client) => Promise<T>, url = testDatabaseUrl()): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** The project's stored mailbox rows as MailboxRows, by session id. */
export async function storedMailbox(key: string): Promise<MailboxRow[]> {
  const r = await admin((c) =>
    c.query<{ row: MailboxRow }>(`select ${mailboxRowJson('m')} as row from "oc_${key}".mailbox m`),
  );
  return r.rows.map((x) => x.row).sort((a, b) => (a.session_id < b.session_id ? -1 : 1));
}

export const dropProject = (key: string): Promise<void> =>
  admin(async (c) => void (await c.query(`drop schema if exists "oc_${key}" cascade`)));

/** SQL that takes a project of this layout back to how layout 2 laid it out (a test of the
 *  upgrade): snapshots as jsonb written whole, a history row per envelope (its rows kept), each
 *  mailbox row in one column (emptied), and that layout's functions. Layout 1 had no mailbox. */
export function asLayout(key: string, layout: 1 | 2): string {
  const s = `"oc_${key}"`;
  return `alter table ${s}.snapshots alter column state type jsonb using state::jsonb;
    drop function ${s}.compact(bigint, int); drop table ${s}.snapshot_parts;
    create function ${s}.compact(p_seq bigint, p_state jsonb) returns void language sql as 'select null';
    alter table ${s}.history rename to history_3; alter index ${s}.history_channel rename to history_3_channel;
    create table ${s}.history (n bigserial primary key, channel_id text not null, message_id text not null, envelope jsonb not null);
    create index history_channel on ${s}.history (channel_id, n);
    insert into ${s}.history (channel_id, message_id, envelope)
      select h.channel_id, x.id, (h.envelopes -> (x.i - 1)::int)::jsonb from ${s}.history_3 h, unnest(h.message_ids) with ordinality x(id, i) order by h.n, x.i;
    drop table ${s}.history_3;
    drop table ${s}.mailbox;
    ${layout === 2 ? `create table ${s}.mailbox (session_id text primary key, summary jsonb not null);` : ''}
    update ${s}.meta set layout = ${layout}`;
}
