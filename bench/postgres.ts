// The PostgreSQL store's figures beside a floor measured in the same run on the same server: a
// send through the runtime (engine + store, in process) against one INSERT of the same message
// in autocommit, taken in turns; and the wake of a subscriber in another store instance through
// LISTEN/NOTIFY. One JSON line per figure.
//   OPENCOMMS_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/postgres.ts
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Runtime } from '../src/runtime/runtime.ts';
import { ident } from '../src/store/postgres/schema.ts';
import { PgStore } from '../src/store/postgres/store.ts';
import { emit, emitRatio, message, now, round, setupChannels, stats, withProject } from './lib.ts';

const url = process.env.OPENCOMMS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const N = Number(process.env.BENCH_PG_N ?? 1000);
/** Untimed sends first: V8 tiers the hot path up over the first few hundred calls. */
const WARM = 300;
const CHANNELS = 3;
const WAKES = 200;

const key = `bench_${randomBytes(4).toString('hex')}`;
const floorTable = `${ident(`oc_${key}`)}.floor`;

async function main() {
  const admin = new pg.Client(url);
  await admin.connect();
  await withProject(async (dir) => {
    const store = new PgStore({ url, key });
    const rt = new Runtime(store);
    await setupChannels(rt, dir, CHANNELS);
    await admin.query(`create table ${floorTable} (id text primary key, channel text, body jsonb)`);
    const floor = new pg.Client(url);
    await floor.connect();
    const insert = async (i: number) => {
      const t = now();
      await floor.query({
        name: 'floor',
        text: `insert into ${floorTable} values ($1, $2, $3)`,
        values: [randomBytes(8).toString('hex'), 'bench-0', JSON.stringify({ content: message(i) })],
      });
      return now() - t;
    };
    const send = async (i: number) => {
      const t = now();
      const r = await rt.run({
        op: 'send',
        sid: 'a',
        args: { channel: `bench-${i % CHANNELS}`, content: `timed ${message(i)}` },
      });
      if (!r.ok) throw new Error(`send refused: ${r.message}`);
      const ms = now() - t;
      if (i % 20 === 19) await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
      return ms;
    };
    for (let i = 0; i < WARM; i++) await Promise.all([send(N + i), insert(N + i)]);
    const sends: number[] = [];
    const inserts: number[] = [];
    for (let i = 0; i < N; i++) {
      if (i % 2) {
        inserts.push(await insert(i));
        sends.push(await send(i));
      } else {
        sends.push(await send(i));
        inserts.push(await insert(i));
      }
    }
    const s = stats(sends);
    const f = stats(inserts);
    emitRatio('pg: send p50 (runtime in process) / one INSERT', s.p50, f.p50, '<= 2 (target of the MCP send)', {
      send_p99_ms: round(s.p99, 3),
      insert_p99_ms: round(f.p99, 3),
      n: N,
    });
    await wake(rt);
    await floor.end();
    await rt.close();
  });
  await admin.query(`drop schema if exists ${ident(`oc_${key}`)} cascade`);
  await admin.end();
}

/** A mutation committed by one instance until the subscriber callback of another runs. */
async function wake(rt: Runtime) {
  const other = new PgStore({ url, key });
  let resolve: (() => void) | null = null;
  const w = await other.subscribe(
    async () => resolve?.(),
    () => {},
  );
  const samples: number[] = [];
  for (let i = 0; i < WAKES; i++) {
    const woken = new Promise<void>((r) => (resolve = r));
    const t = now();
    await rt.run({ op: 'send', sid: 'a', args: { channel: `bench-${i % CHANNELS}`, content: `wake ${message(i)}` } });
    await woken;
    samples.push(now() - t);
    resolve = null;
  }
  const s = stats(samples);
  emit('pg: send committed in A -> subscriber callback in B (NOTIFY)', {
    p50_ms: round(s.p50, 3),
    p99_ms: round(s.p99, 3),
    target: 'p50 <= 10 ms, p99 <= 30 ms',
    n: WAKES,
  });
  await w.close();
  await other.close();
}

await main();
