// Leases in the PostgreSQL store, on a real server: renewed and judged on the database's clock, one
// query per renewal answering everyone's, released at a clean exit.
import { afterEach, describe, expect, it } from 'vitest';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

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

  it('works on a project laid out before leases existed (the table is created on first use)', async () => {
    const key = newProjectKey();
    keys.push(key);
    const s = open(key);
    await s.mutate(() => ({ changed: false, result: null }));
    expect((await s.leases.snapshot()).live.size).toBe(0);
  });
});
