// Leases in the PostgreSQL store, on a real server: renewed and judged on the database's clock, one
// query per renewal answering everyone's, released at a clean exit.
import { afterEach, describe, expect, it } from 'vitest';
import { PG_HEARD_FRESH_MS } from '../../../src/store/postgres/limits.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { admin, dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

const M1 = '11111111-1111-4111-8111-111111111111';
const M2 = '22222222-2222-4222-8222-222222222222';
const stores: PgStore[] = [];
const keys: string[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const k of keys.splice(0)) await dropProject(k);
});
const open = (key: string) => {
  const s = new PgStore({ url: testDatabaseUrl(), key });
  stores.push(s);
  return s;
};

describe('PostgreSQL leases', () => {
  it('a renewal answers every lease; one that is not renewed expires on the database clock; a release ends it at once', async () => {
    const key = newProjectKey();
    keys.push(key);
    const a = open(key);
    const b = open(key);
    await a.leases.renew(`1@a/${M1}`, M1, 400);
    const v = await b.leases.renew(`2@b/${M2}`, M2, 60_000);
    expect([...v.live].sort()).toEqual([`1@a/${M1}`, `2@b/${M2}`]);
    expect(v.left.get(`1@a/${M1}`)).toBeLessThanOrEqual(400);
    await new Promise((r) => setTimeout(r, 600));
    const later = await b.leases.snapshot();
    expect(later.live.has(`1@a/${M1}`)).toBe(false);
    expect(later.left.get(`1@a/${M1}`)).toBeLessThan(0);
    await b.leases.release(`2@b/${M2}`);
    expect((await a.leases.snapshot()).live.has(`2@b/${M2}`)).toBe(false);
  });

  it('a renewal reads the head: a change it shows, whose notification never came, wakes the watchers', async () => {
    const key = newProjectKey();
    keys.push(key);
    const a = open(key);
    await a.peek(); // laid out, and up to date at change 0
    let told = 0;
    const w = await a.subscribe(
      async () => void told++,
      () => {},
    );
    await new Promise((r) => setTimeout(r, 300));
    told = 0;
    // A change committed with no notification: only a query of the head can tell.
    await admin((c) =>
      c.query(
        `insert into "oc_${key}".changes values (1, '[["a", ["errors"], [{"at": 1, "message": "unnotified"}]]]', false); update "oc_${key}".head set seq = 1`,
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(told).toBe(0);
    await a.leases.renew(`1@a/${M1}`, M1, 60_000);
    for (let i = 0; i < 100 && told === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(told).toBeGreaterThan(0);
    expect((await a.peek()).errors.map((e) => e.message)).toEqual(['unnotified']);
    await w.close();
  });

  it("a mutation's answer that writes nothing is judged on the head, even right after a renewal read it", async () => {
    const key = newProjectKey();
    keys.push(key);
    const b = open(key);
    await b.peek();
    // A change committed by someone else just after B's renewal read the head (with no
    // notification), then B's read-only mutation within PG_HEARD_FRESH_MS of that renewal: its
    // answer must include the change, which was committed before the mutation began.
    await admin(async (c) => {
      for (let seq = 1; seq <= 5; seq++) {
        await b.leases.renew(`1@b/${M1}`, M1, 60_000);
        const renewed = performance.now();
        await c.query(
          `insert into "oc_${key}".changes values (${seq}, '[["a", ["errors"], [{"at": 1, "message": "e${seq}"}]]]', false); update "oc_${key}".head set seq = ${seq}`,
        );
        const seen = await b.mutate((d) => ({ changed: false, result: d.errors.map((e) => e.message) }));
        expect(seen).toContain(`e${seq}`);
        if (performance.now() - renewed < PG_HEARD_FRESH_MS) return;
      }
      throw new Error(`no try ran within ${PG_HEARD_FRESH_MS} ms of a renewal: the case was not exercised`);
    });
  });

  it('a renewal that read the head before a change this process was notified of does not hide that change', async () => {
    const key = newProjectKey();
    keys.push(key);
    const a = open(key);
    const b = open(key);
    await a.leases.renew(`1@a/${M1}`, M1, 60_000); // its row exists, to be held below
    await a.peek();
    const w = await a.subscribe(
      async () => {},
      () => {},
    );
    await admin(async (c) => {
      // A's next renewal reads the head at change 0, then waits for its lease row; meanwhile B
      // commits change 1 and A is notified; then the renewal answers, 0, after the notification.
      await c.query(`begin; select * from "oc_${key}".leases for update`);
      const renewal = a.leases.renew(`1@a/${M1}`, M1, 60_000);
      await new Promise((r) => setTimeout(r, 100));
      await b.mutate((d) => {
        d.errors.push({ at: 1, message: 'notified' });
        return { changed: true, result: null };
      });
      await new Promise((r) => setTimeout(r, 300));
      await c.query('rollback');
      await renewal;
    });
    expect((await a.peek()).errors.map((e) => e.message)).toEqual(['notified']);
    await w.close();
  });

  it('works on a project laid out before leases existed (the table is created on first use)', async () => {
    const key = newProjectKey();
    keys.push(key);
    const s = open(key);
    await s.mutate(() => ({ changed: false, result: null }));
    expect((await s.leases.snapshot()).live.size).toBe(0);
  });
});
