// The PostgreSQL store's own mechanics, beyond the contract: a mutation computed on a state that
// another process has since moved on from runs again on the newer state (never commits over it),
// snapshots bound what a cold start reads, and two projects in one database never meet.
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import type { State } from '../../../src/protocol/schema.ts';
import { PG_LAYOUT, layoutSql } from '../../../src/store/postgres/schema.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { admin, asLayout, dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

const keys: string[] = [];
const stores: PgStore[] = [];
const open = (key: string, snapshotEvery?: number) => {
  const s = new PgStore({ url: testDatabaseUrl(), key, snapshotEvery });
  stores.push(s);
  return s;
};
const key = () => {
  const k = newProjectKey('c');
  keys.push(k);
  return k;
};
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const k of keys.splice(0)) await dropProject(k);
});
const messages = (s: Readonly<State>) => s.errors.map((e) => e.message);

it('a mutation on a stale cache runs again on the newer state, once the others’ changes are applied', async () => {
  const k = key();
  const [a, b] = [open(k), open(k)];
  await b.peek(); // b caches change 0
  await a.mutate((d) => {
    d.errors.push({ at: 1, message: 'from a' });
    return { changed: true, result: null };
  });
  const seenBy: string[][] = [];
  const n = await b.mutate((d) => {
    seenBy.push(messages(d));
    d.errors.push({ at: 1, message: `b after ${d.errors.length}` });
    return { changed: true, result: d.errors.length };
  });
  expect(seenBy).toEqual([[], ['from a']]);
  expect(n).toBe(2);
  expect(messages(await a.read())).toEqual(['from a', 'b after 1']);
});

it('a cold start reads one snapshot and a bounded tail of changes', async () => {
  const k = key();
  const a = open(k, 3);
  for (let i = 0; i < 10; i++)
    await a.mutate((d) => {
      d.errors.push({ at: 1, message: `m${i}` });
      return { changed: true, result: null };
    });
  await a.close(); // the snapshot is written in the background; close waits for it
  const { snapshots, changes } = await admin(
    async (c) =>
      (
        await c.query(
          `select (select count(*)::int from "oc_${k}".snapshots) as snapshots, (select count(*)::int from "oc_${k}".changes) as changes`,
        )
      ).rows[0],
  );
  expect(snapshots).toBe(1);
  expect(changes).toBeLessThanOrEqual(2 * 3);
  expect(messages(await open(k, 3).read())).toEqual(Array.from({ length: 10 }, (_, i) => `m${i}`));
});

it('two projects in one database never see each other', async () => {
  const [k1, k2] = [key(), key()];
  await open(k1).mutate((d) => {
    d.errors.push({ at: 1, message: 'one' });
    return { changed: true, result: null };
  });
  expect((await open(k2).read()).errors).toEqual([]);
  expect(messages(await open(k1).read())).toEqual(['one']);
});

it('a dropped listening connection comes back: the subscriber is told to look again, and notifications wake it again', async () => {
  const k = key();
  const [a, b] = [open(k), open(k)];
  await a.mutate((d) => {
    d.errors.push({ at: 1, message: 'first' });
    return { changed: true, result: null };
  });
  let woken = 0;
  const w = await b.subscribe(
    async () => void woken++,
    () => {},
  );
  const listening = () =>
    admin(async (c) =>
      (await c.query(`select pid from pg_stat_activity where query = 'listen "oc_${k}"'`)).rows.map(
        (r) => r.pid as number,
      ),
    );
  const until = async (cond: () => Promise<boolean> | boolean, ms: number) => {
    const end = Date.now() + ms;
    while (!(await cond())) {
      if (Date.now() > end) throw new Error(`not within ${ms} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await until(async () => (await listening()).length === 1, 5_000);
  const [pid] = await listening();
  await admin((c) => c.query('select pg_terminate_backend($1)', [pid]));
  const before = woken;
  // Reconnected (a new backend listens) and told to look again without any new change.
  await until(async () => (await listening()).some((p) => p !== pid), 10_000);
  await until(() => woken > before, 5_000);
  const seen = woken;
  await a.mutate((d) => {
    d.errors.push({ at: 1, message: 'second' });
    return { changed: true, result: null };
  });
  await until(() => woken > seen, 5_000);
  expect(messages(await b.read())).toEqual(['first', 'second']);
  await w.close();
});

it('a project of layout 2 is upgraded on first use: its snapshot and history still read, later snapshots are json in pieces, history rows batches', async () => {
  const k = key();
  const a = open(k, 3);
  const write = async (s: PgStore, i: number) =>
    s.mutate((d) => {
      d.errors.push({ at: 1, message: `m${i}` });
      return { changed: true, result: null };
    });
  for (let i = 0; i < 4; i++) await write(a, i);
  await a.close();
  const s = `"oc_${k}"`;
  await admin((c) =>
    c.query(`${asLayout(k, 2)};
      insert into ${s}.history (channel_id, message_id, envelope) values
        ('chn_x', 'ocm_1', '{"message_id": "ocm_1", "n": 1}'), ('chn_y', 'ocm_2', '{"message_id": "ocm_2", "n": 2}'),
        ('chn_x', 'ocm_3', '{"message_id": "ocm_3", "n": 3}')`),
  );
  const b = open(k, 3);
  expect(messages(await b.read())).toEqual(['m0', 'm1', 'm2', 'm3']);
  expect(await b.history('chn_x', 10)).toEqual([
    { message_id: 'ocm_3', n: 3 },
    { message_id: 'ocm_1', n: 1 },
  ]);
  expect([...(await b.historyIds('chn_x'))].sort()).toEqual(['ocm_1', 'ocm_3']);
  expect(await b.findInHistory('chn_x', 'ocm_1', 10)).toEqual({ message_id: 'ocm_1', n: 1 });
  for (let i = 4; i < 6; i++) await write(b, i);
  await b.close();
  const after = await admin(
    async (c) =>
      (
        await c.query(
          `select (select layout from ${s}.meta) as layout, (select max(seq)::int from ${s}.snapshots) as snapshot,
            (select format_type(atttypid, atttypmod) from pg_attribute where attrelid = '${s}.snapshots'::regclass and attname = 'state') as type,
            (select array_agg(pg_get_function_identity_arguments(oid)) from pg_proc where proname = 'compact' and pronamespace = '${s}'::regnamespace) as compacts`,
        )
      ).rows[0],
  );
  expect(after).toEqual({ layout: PG_LAYOUT, snapshot: 6, type: 'json', compacts: ['p_seq bigint, p_parts integer'] });
  expect(messages(await open(k, 3).read())).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
});

it('a process that waited while another laid the project out does not lay it out again over that one’s work', async () => {
  const k = key();
  const [holder, worker] = [new pg.Client(testDatabaseUrl()), new pg.Client(testDatabaseUrl())];
  await holder.connect();
  await worker.connect();
  try {
    // The first process holds the layout lock: the second finds no project and waits for the lock.
    await holder.query(`begin; select pg_advisory_xact_lock(hashtext('opencomms:oc_${k}'))`);
    const late = open(k);
    const read = late.peek().then(() => 'read' as const);
    await new Promise((r) => setTimeout(r, 300));
    // The first lays it out and, once it let go of the lock, is at work in a transaction.
    await holder.query(`${layoutSql(`oc_${k}`)} commit`);
    await worker.query(`begin; insert into "oc_${k}".snapshot_parts values (1, 0, '{}')`);
    const timeout = new Promise<'blocked'>((r) => setTimeout(() => r('blocked'), 3000));
    expect(await Promise.race([read, timeout])).toBe('read');
  } finally {
    await worker.query('rollback').catch(() => {});
    await holder.end();
    await worker.end();
  }
});
