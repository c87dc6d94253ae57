// Every connection a store opens runs without parallel workers and without JIT (connect.ts
// `clientConfig`): a store's queries read a handful of rows, but the planner estimates a read of
// the changes after a sequence number from the table's size on disk, which compaction's deletes
// grow until autovacuum analyzes it, and it then planned a parallel scan (~10 ms of starting
// workers to answer a few rows; `npm run bench -- postgres mcp`, the pull of 100). A URL's own
// `options` are kept.
import pg from 'pg';
import { expect, it } from 'vitest';
import { clientConfig } from '../../../src/store/postgres/connect.ts';
import { testDatabaseUrl } from '../../helpers/postgres.ts';

const NAMES = ['max_parallel_workers_per_gather', 'jit'];

async function settings(url: string, names: string[]): Promise<string[]> {
  const c = new pg.Client(clientConfig(url));
  await c.connect();
  try {
    const out: string[] = [];
    for (const n of names) out.push((await c.query(`show ${n}`)).rows[0][n]);
    return out;
  } finally {
    await c.end();
  }
}

it('a store connection plans no parallel workers and no JIT', async () => {
  expect(await settings(testDatabaseUrl(), NAMES)).toEqual(['0', 'off']);
});

it("a URL's own options are kept beside them", async () => {
  const url = new URL(testDatabaseUrl());
  url.searchParams.set('options', '-c statement_timeout=4321');
  expect(await settings(url.toString(), [...NAMES, 'statement_timeout'])).toEqual(['0', 'off', '4321ms']);
});
