// The PostgreSQL of the store tests (test/helpers/pg-global-setup.ts provides it) and a fresh
// project key per test, so that tests never share rows. Never skipped: no server is a failure.
import { randomBytes } from 'node:crypto';
import pg from 'pg';

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

export const dropProject = (key: string): Promise<void> =>
  admin(async (c) => void (await c.query(`drop schema if exists "oc_${key}" cascade`)));
