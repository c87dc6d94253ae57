// What a pull of 100 pays to log its history in the same transaction: the store's `commit` of a
// pull's change with its 100 envelopes (one batch row, the layout), of the same change with none,
// and of the same change writing a jsonb row per envelope (layout 2, measured as the alternative;
// docs/postgres.md). Each in turn on one connection, on a throwaway project; one JSON line each.
//   OPENCOMMS_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/pg-history.ts
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { type HistoryBatches, historyBatches, ident, layoutSql } from '../src/store/postgres/schema.ts';
import { message } from './lib.ts';

const url = process.env.OPENCOMMS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROUNDS = Number(process.env.ROUNDS ?? 300);
const WARM = 20;

/** An acked envelope as the history log holds it (~740 bytes; the MCP bench's pull logs ~850). */
const envelope = (i: number) => ({
  message_id: `ocm_${randomBytes(12).toString('hex')}`,
  channel_id: 'chn_0123456789abcdef01234567',
  sender_session_id: 'sess_aaaaaaaaaaaaaaaaaaaaaaaa',
  sender_role: 'Writer',
  recipient_session_id: 'sess_bbbbbbbbbbbbbbbbbbbbbbbb',
  content: message(i),
  timestamp: Date.now(),
  delivery_status: 'acked',
  attempts: 1,
  transitions: [
    ['pending', 'in_flight', Date.now(), 'pull'],
    ['in_flight', 'acked', Date.now(), 'pull'],
  ],
  correlation_id: `cor_${randomBytes(12).toString('hex')}`,
  metadata: { project_id: 'p'.repeat(32), worktree: '/home/user/project' },
});
/** The pull's own ops: 100 envelopes out of state and the queue rewritten. */
const ops = JSON.stringify([
  ...Array.from({ length: 100 }, (_, i) => ['d', ['messages', `ocm_${i}`.padEnd(28, '0')]]),
  ['s', ['queues', 'sess_bbbbbbbbbbbbbbbbbbbbbbbb'], []],
]);

const c = new pg.Client(url);
await c.connect();
const schema = `oc_bench_history_${randomBytes(4).toString('hex')}`;
const s = ident(schema);
try {
  await c.query(layoutSql(schema));
  await c.query(`create table ${s}.history_rows (n bigserial primary key, channel_id text not null, message_id text not null, envelope jsonb not null);
create index on ${s}.history_rows (channel_id, n);
create function ${s}.commit_rows(expected bigint, p_ops jsonb, p_history jsonb) returns void language plpgsql as $fn$
declare h bigint;
begin
  select seq into h from ${s}.head for update;
  update ${s}.head set seq = expected + 1;
  insert into ${s}.changes values (expected + 1, p_ops, false);
  insert into ${s}.history_rows (channel_id, message_id, envelope)
    select e->>'channel_id', e->>'message_id', e from jsonb_array_elements(p_history) e;
  perform pg_notify('${schema}', (expected + 1)::text);
end $fn$;`);
  let seq = 0;
  type Pull = { batches: HistoryBatches; history: string };
  const kinds = {
    'history as one batch row (the layout)': (p: Pull) => ({
      text: `select * from ${s}.commit($1, $2, $3, $4, $5, $6, null, null, null, null)`,
      values: [seq, ops, p.batches.channels, p.batches.counts, p.batches.ids, p.batches.envelopes],
    }),
    'no history': () => ({
      text: `select * from ${s}.commit($1, $2, null, null, null, null, null, null, null, null)`,
      values: [seq, ops],
    }),
    'history as 100 jsonb rows (layout 2)': (p: Pull) => ({
      text: `select ${s}.commit_rows($1, $2, $3)`,
      values: [seq, ops, p.history],
    }),
  };
  const ms: Record<string, number[]> = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
  let bytes = 0;
  for (let r = 0; r < ROUNDS + WARM; r++) {
    const envelopes = Array.from({ length: 100 }, (_, i) => envelope(i));
    const pull = { batches: historyBatches(envelopes), history: JSON.stringify(envelopes) };
    bytes = pull.history.length;
    // Each kind first in turn: what the first commit of a round pays falls on every kind alike.
    const all = Object.entries(kinds);
    for (const [k, q] of [...all.slice(r % all.length), ...all.slice(0, r % all.length)]) {
      const t = performance.now();
      await c.query(q(pull));
      seq++;
      if (r >= WARM) ms[k]!.push(performance.now() - t);
    }
  }
  for (const [k, xs] of Object.entries(ms)) {
    xs.sort((a, b) => a - b);
    const at = (q: number) => +xs[Math.floor(xs.length * q)]!.toFixed(3);
    console.log(
      JSON.stringify({ figure: 'pull_100_commit', kind: k, history_bytes: bytes, p50_ms: at(0.5), p99_ms: at(0.99) }),
    );
  }
} finally {
  await c.query(`drop schema if exists ${s} cascade`);
  await c.end();
}
