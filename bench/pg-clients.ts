// Chooses the PostgreSQL client of the store by measuring both candidates on its workload: one
// commit() per mutation (a send's ops, ~600 bytes of JSON) and one catch-up select, in turn, on
// one connection each. Prints one JSON line per client and figure.
//   OPENCOMMS_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/pg-clients.ts
import pg from 'pg';
import postgres from 'postgres';
import { ident, layoutSql } from '../src/store/postgres/schema.ts';

const url = process.env.OPENCOMMS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROUNDS = Number(process.env.ROUNDS ?? 2000);
const ops = JSON.stringify([
  ['s', ['messages', 'msg_x'], { message_id: 'msg_x', channel_id: 'chn_a', content: 'x'.repeat(400) }],
  ['a', ['queues', 'sess_b'], ['msg_x']],
]);

const p = (xs: number[], q: number) => xs.sort((a, b) => a - b)[Math.floor(xs.length * q)]!;

async function measure(
  name: string,
  commit: (seq: number) => Promise<unknown>,
  since: (seq: number) => Promise<unknown>,
) {
  const c: number[] = [];
  const s: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    let t = performance.now();
    await commit(i);
    c.push(performance.now() - t);
    t = performance.now();
    await since(i);
    s.push(performance.now() - t);
  }
  console.log(
    JSON.stringify({ client: name, figure: 'commit', p50_ms: +p(c, 0.5).toFixed(3), p99_ms: +p(c, 0.99).toFixed(3) }),
  );
  console.log(
    JSON.stringify({
      client: name,
      figure: 'catch-up select',
      p50_ms: +p(s, 0.5).toFixed(3),
      p99_ms: +p(s, 0.99).toFixed(3),
    }),
  );
}

const admin = new pg.Client(url);
await admin.connect();
for (const schema of ['oc_bench_pg', 'oc_bench_postgres'])
  await admin.query(`drop schema if exists ${ident(schema)} cascade; ${layoutSql(schema)}`);

const a = new pg.Client(url);
await a.connect();
const sa = ident('oc_bench_pg');
await measure(
  'pg 8.23.1',
  (i) =>
    a.query({ name: 'c', text: `select * from ${sa}.commit($1, $2, null, null, null, null, null)`, values: [i, ops] }),
  (i) =>
    a.query({
      name: 's',
      text: `select seq, ops, archives from ${sa}.changes where seq > $1 order by seq`,
      values: [i + 1],
    }),
);
await a.end();

const b = postgres(url, { max: 1, onnotice: () => {} });
const sb = ident('oc_bench_postgres');
await measure(
  'postgres 3.4.9',
  (i) => b.unsafe(`select * from ${sb}.commit($1, $2, null, null, null, null, null)`, [i, ops], { prepare: true }),
  (i) =>
    b.unsafe(`select seq, ops, archives from ${sb}.changes where seq > $1 order by seq`, [i + 1], { prepare: true }),
);
await b.end();

for (const schema of ['oc_bench_pg', 'oc_bench_postgres']) await admin.query(`drop schema ${ident(schema)} cascade`);
await admin.end();
