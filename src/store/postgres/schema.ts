// The tables of one project in PostgreSQL: a schema per project (`oc_<key>`), so many projects
// share one database without touching each other and a role granted one schema sees no other.
// One mutation is one call of `commit`, one statement in autocommit, so one round trip: it takes
// the project's head row lock, and either appends the change (the `Op`s of src/protocol/draft.ts)
// with its history and archive rows and a notification carrying the new sequence number and the
// change's channel only, or, when the caller's cached head is behind by a change it must see,
// returns the changes it has not seen (it applies them and runs its mutation again). A change
// names the one channel it concerns (`channel`, null: any): a caller that keeps only some channels
// current (its focus, `p_focus`) must see the changes of those and every change of no one channel, and
// commits past the others (store.ts, "Focus"). A snapshot every PG_SNAPSHOT_EVERY changes
// bounds a cold start.
// The same statement stores the mailbox rows the change alters (mailbox.ts), for the hook runner.
import { RefusalError, refuse } from '../../protocol/result.ts';

/** The layout version written by this OpenComms; a schema with a higher one is refused. */
export const PG_LAYOUT = 4;

/** A project key: lowercase, digits, `_` and `-`; it names the schema and the notify channel. */
export const PROJECT_KEY_RE = /^[a-z0-9][a-z0-9_-]{0,47}$/;

export function schemaOf(key: string): string {
  if (!PROJECT_KEY_RE.test(key))
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `"${key}" is not a project key: use 1-48 of a-z, 0-9, _ and - (starting with a letter or digit).`,
      ),
    );
  return `oc_${key}`;
}

/** A schema name as an SQL identifier (keys are checked by schemaOf, so no quote can occur). */
export const ident = (schema: string) => `"${schema}"`;

/** SQL: whether the change row (columns prefixed `row`) concerns a process whose focus is the
 *  text[] `focus`: a change of no one channel, or of a channel in it (store.ts, "Focus"). */
export const concernsFocus = (focus: string, row = '') => `(${row}channel is null or ${row}channel = any(${focus}))`;

export function layoutSql(schema: string): string {
  const s = ident(schema);
  return `
-- Created only when missing: a role that owns its schema (store grant) may not create schemas.
do $do$ begin
  if not exists (select 1 from pg_namespace where nspname = '${schema}') then create schema ${s}; end if;
end $do$;
create table if not exists ${s}.meta (layout int not null);
insert into ${s}.meta (layout) select ${PG_LAYOUT} where not exists (select 1 from ${s}.meta);
create table if not exists ${s}.head (one boolean primary key default true check (one), seq bigint not null, retired text);
insert into ${s}.head (seq) values (0) on conflict do nothing;
create table if not exists ${s}.changes (seq bigint primary key, ops jsonb not null, archives boolean not null);
-- The one channel (its key in the state) a change reads and writes; null: it may touch any.
alter table ${s}.changes add column if not exists channel text;
create table if not exists ${s}.snapshots (seq bigint primary key, state json not null);
-- A snapshot is written and read whole, never queried inside: json is stored as sent (jsonb parses
-- it into a binary form, 2-3x the cost of a 3 MB state).
alter table ${s}.snapshots alter column state type json;
-- History: the envelopes that left live state, a row per change and channel (a pull of 100 writes
-- one row, not 100), with their ids and the envelopes as a json array in the same order.
create table if not exists ${s}.history (n bigserial primary key, channel_id text not null, message_ids text[] not null, envelopes json not null);
create index if not exists history_channel on ${s}.history (channel_id, n);
-- A snapshot and a pull's history batch (~75 KB for 100 envelopes) are compressed as they are
-- stored: lz4 takes a third of pglz's time, where the server was built with it.
do $do$ begin
  alter table ${s}.snapshots alter column state set compression lz4;
  alter table ${s}.history alter column envelopes set compression lz4;
exception when feature_not_supported or invalid_parameter_value then null;
end $do$;
create table if not exists ${s}.archives (channel_id text primary key, name text not null, saved_at bigint not null, archive jsonb not null);
-- A member's row in parts (mailbox.ts MailboxWrite): a change stores only the parts it altered.
-- seats and in_flight may be left out of a write (null) and are kept then, so they are nullable
-- (NOT NULL is checked before a conflict turns the insert into an update); a new row comes whole.
create table if not exists ${s}.mailbox (session_id text primary key, seats jsonb, queued int not null, in_flight jsonb);
-- The commits of layouts 1 and 2 (no mailbox rows; a history row per envelope): gone, so that a
-- process of those OpenComms versions cannot commit.
drop function if exists ${s}.commit(bigint, jsonb, jsonb, jsonb, text, text[]);
drop function if exists ${s}.commit(bigint, jsonb, jsonb, jsonb, text, text[], jsonb);
-- Layout 3's commit knew no channels: gone, so that a process of that OpenComms cannot commit.
drop function if exists ${s}.commit(bigint, jsonb, text[], int[], text[], text[], jsonb, text, text[], jsonb);
-- p_channel: the channel the change concerns (null: any); p_focus: the channels the caller keeps
-- current. p_history_*: the history batches, one per channel (historyBatches). A change the caller
-- must see comes back with its ops; one of a channel out of its focus, with none (o_ops null):
-- it learns the sequence number only. o_mine: the one row of this change, committed.
create or replace function ${s}.commit(expected bigint, p_channel text, p_focus text[], p_ops jsonb, p_history_c text[], p_history_n int[], p_history_ids text[], p_history_e text[],
  p_archive jsonb, p_del_archive text, p_del_history text[], p_mailbox jsonb)
returns table(o_seq bigint, o_ops jsonb, o_archives boolean, o_channel text, o_mine boolean) language plpgsql as $fn$
declare
  h bigint;
  gone text;
  arch boolean := p_archive is not null or p_del_archive is not null;
begin
  select seq, retired into h, gone from ${s}.head for update;
  if gone is not null then
    raise exception 'opencomms: project retired: %', gone using errcode = 'OC001';
  end if;
  if h <> expected and (p_channel is null or exists (select 1 from ${s}.changes c
      where c.seq > expected and ${concernsFocus('p_focus', 'c.')})) then
    return query select c.seq, case when p_channel is null or ${concernsFocus('p_focus', 'c.')} then c.ops end,
      c.archives, c.channel, false from ${s}.changes c where c.seq > expected order by c.seq;
    return;
  end if;
  update ${s}.head set seq = h + 1;
  insert into ${s}.changes (seq, ops, archives, channel) values (h + 1, p_ops, arch, p_channel);
  if p_history_c is not null then
    ${insertHistorySql(schema, ['p_history_c', 'p_history_n', 'p_history_ids', 'p_history_e'])};
  end if;
  if p_archive is not null then
    insert into ${s}.archives values (p_archive->>'channel_id', p_archive->>'name', (p_archive->>'saved_at')::bigint, p_archive)
      on conflict (channel_id) do update set name = excluded.name, saved_at = excluded.saved_at, archive = excluded.archive;
  end if;
  if p_del_archive is not null then delete from ${s}.archives where channel_id = p_del_archive; end if;
  if p_del_history is not null then delete from ${s}.history where channel_id = any(p_del_history); end if;
  if p_mailbox is not null then
    delete from ${s}.mailbox where session_id in (select jsonb_array_elements_text(p_mailbox->'remove'));
    insert into ${s}.mailbox as m
      select ${mailboxColumns('r')} from jsonb_array_elements(p_mailbox->'upsert') r
      on conflict (session_id) do update set seats = coalesce(excluded.seats, m.seats), queued = excluded.queued,
        in_flight = coalesce(excluded.in_flight, m.in_flight);
  end if;
  perform pg_notify('${schema}', (h + 1)::text || ' ' || coalesce(p_channel, '*') || case when arch then ' a' else '' end);
  return query select h + 1, null::jsonb, arch, p_channel, true;
end $fn$;
-- A snapshot arrives in pieces (store.ts, snapshot), joined here once all of them are in. They
-- live for one compaction: unlogged (no WAL) and uncompressed (the joined snapshot is compressed).
create unlogged table if not exists ${s}.snapshot_parts (seq bigint not null, n int not null, part text not null, primary key (seq, n));
alter table ${s}.snapshot_parts alter column part set storage external;
drop function if exists ${s}.compact(bigint, jsonb);
create or replace function ${s}.compact(p_seq bigint, p_parts int) returns void language plpgsql as $fn$
declare prev bigint;
begin
  if (select count(*) from ${s}.snapshot_parts where seq = p_seq) = p_parts then
    insert into ${s}.snapshots select p_seq, string_agg(part, '' order by n)::json from ${s}.snapshot_parts where seq = p_seq
      on conflict do nothing;
  end if;
  -- Parts of this snapshot or an older one that did not complete (its writer died) go too.
  delete from ${s}.snapshot_parts where seq <= p_seq;
  if not exists (select 1 from ${s}.snapshots where seq = p_seq) then return; end if;
  select max(seq) into prev from ${s}.snapshots where seq < p_seq;
  delete from ${s}.snapshots where seq < p_seq;
  -- The changes since the previous snapshot stay, for processes that lag behind by less.
  if prev is not null then delete from ${s}.changes where seq <= prev; end if;
end $fn$;
`;
}

/** A cold start: the newest snapshot and every change after it, read in one snapshot of the
 *  database (a compaction between the two selects would otherwise hide changes). */
export const loadSql = (schema: string) => `begin isolation level repeatable read read only;
${loadSelects(schema)}
commit;`;

/** The two selects of a cold start, for a transaction that is already open. */
export const loadSelects = (schema: string) => {
  const s = ident(schema);
  return `select (select layout from ${s}.meta) as layout, (select retired from ${s}.head) as retired, n.seq, n.state
  from (select 1) one left join (select seq, state from ${s}.snapshots order by seq desc limit 1) n on true;
select seq, ops, archives, channel from ${s}.changes where seq > coalesce((select max(seq) from ${s}.snapshots), 0) order by seq;`;
};

/** The mailbox table's columns from `r`, the jsonb of a MailboxRow or a MailboxWrite (a part a
 *  write leaves out is null). */
const mailboxColumns = (r: string) => `${r}->>'session_id', ${r}->'seats', (${r}->>'queued')::int, ${r}->'in_flight'`;

/** The stored mailbox row `m` as the JSON of its MailboxRow (what the hook runner's glance reads). */
export const mailboxRowJson = (m: string) =>
  `json_build_object('session_id', ${m}.session_id, 'seats', ${m}.seats, 'queued', ${m}.queued, 'in_flight', ${m}.in_flight)`;

/** Inserts the mailbox rows of a whole state (a project moved in, or laid out before the mailbox). */
export const fillMailboxSql = (schema: string) =>
  `insert into ${ident(schema)}.mailbox select ${mailboxColumns('r')} from jsonb_array_elements($1::jsonb) r`;

/** Inserts the history batches (`historyBatches`) held by four SQL expressions: each batch's
 *  channel, its count of envelopes, every id in order, and each batch's envelopes as JSON text. The
 *  ids and envelopes arrive as text (one json check as they are stored), since a json parameter
 *  would be read whole once more for each field taken out of it. */
export const insertHistorySql = (schema: string, [c, n, ids, e]: readonly [string, string, string, string]) =>
  `insert into ${ident(schema)}.history (channel_id, message_ids, envelopes)
      select (${c})[b.i], (${ids})[b.upto - (${n})[b.i] + 1 : b.upto], (${e})[b.i]::json
      from (select i, (sum((${n})[i]) over (order by i))::int as upto from generate_subscripts(${c}, 1) i) b order by b.i`;

/** The history's envelopes, a row each: `x.envelope`, its batch `h.n` and place `x.i` in it. */
export const historyEnvelopes = (schema: string) =>
  `${ident(schema)}.history h cross join lateral json_array_elements(h.envelopes) with ordinality x(envelope, i)`;

export interface HistoryBatches {
  channels: string[];
  counts: number[];
  ids: string[];
  envelopes: string[];
}

/** Envelopes leaving live state as `commit` takes them: a batch per channel, each in order. */
export function historyBatches(envelopes: readonly { channel_id: string; message_id: string }[]): HistoryBatches {
  const by = new Map<string, { ids: string[]; e: unknown[] }>();
  for (const e of envelopes) {
    let b = by.get(e.channel_id);
    if (!b) by.set(e.channel_id, (b = { ids: [], e: [] }));
    b.ids.push(e.message_id);
    b.e.push(e);
  }
  const batches = [...by.values()];
  return {
    channels: [...by.keys()],
    counts: batches.map((b) => b.ids.length),
    ids: batches.flatMap((b) => b.ids),
    envelopes: batches.map((b) => JSON.stringify(b.e)),
  };
}
