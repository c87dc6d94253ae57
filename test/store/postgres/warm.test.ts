// `PgStore.warm` (a Claude Code wake waiter readies its connection for its one commit): a commit of
// no change, rolled back. Nothing of it is kept or notified, it holds nobody up afterwards, and the
// commit that follows on the same connection commits as usual.
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { admin, dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

const keys: string[] = [];
const stores: PgStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const k of keys.splice(0)) await dropProject(k);
});

it('warm keeps nothing and notifies nobody; the next commit and another process’s commit go through', async () => {
  const key = newProjectKey('w');
  keys.push(key);
  const [a, b] = [new PgStore({ url: testDatabaseUrl(), key }), new PgStore({ url: testDatabaseUrl(), key })];
  stores.push(a, b);
  await a.mutate((d) => {
    d.errors.push({ at: 1, message: 'first' });
    return { changed: true, result: null };
  });
  await b.peek();
  const heard: string[] = [];
  const listener = new pg.Client({ connectionString: testDatabaseUrl() });
  await listener.connect();
  try {
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query(`listen "oc_${key}"`);
    const counts = () =>
      admin(async (c) => {
        const head = await c.query(`select seq from "oc_${key}".head`);
        const changes = await c.query(`select count(*)::int as n from "oc_${key}".changes`);
        return { head: Number(head.rows[0].seq), changes: changes.rows[0].n as number };
      });
    const before = await counts();
    await b.warm();
    expect(await counts()).toEqual(before);
    // The head's lock was let go: another process commits at once.
    await a.mutate((d) => {
      d.errors.push({ at: 1, message: 'from a' });
      return { changed: true, result: null };
    });
    await b.mutate((d) => {
      d.errors.push({ at: 1, message: 'from b' });
      return { changed: true, result: null };
    });
    await listener.query('select 1'); // notifications sent before this answer have arrived
    // Each notification names the change's number and its channel (`*`: a change of no one channel).
    expect(heard).toEqual([`${before.head + 1} *`, `${before.head + 2} *`]);
    expect((await b.read()).errors.map((e) => e.message)).toEqual(['first', 'from a', 'from b']);
    expect(await counts()).toEqual({ head: before.head + 2, changes: before.changes + 2 });
  } finally {
    await listener.end();
  }
});
