// A commit whose answer is lost with its connection: the server may or may not have committed it.
// The store must find out before it answers (a send refused as "nothing was written" that the
// store in fact holds is a lie a model acts on: it sends again). A proxy between the store and
// the server cuts the connection at the commit statement, after the server answered it (committed,
// answer lost) or before the server saw it (never committed), and can stay down.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { RefusalError } from '../../../src/protocol/result.ts';
import type { State } from '../../../src/protocol/schema.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

type Cut = 'none' | 'after-commit' | 'before-commit';

/** A TCP proxy to the test server that cuts the connection carrying the next statement that holds
 *  `at` (by default the commit statement of `schema`), as `cut` says (once: then it passes
 *  everything again); `down` refuses new connections (the server unreachable). */
class CuttingProxy {
  cut: Cut = 'none';
  down = false;
  cuts = 0;
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(schema: string, at = `${schema}.commit`): Promise<CuttingProxy> {
    const target = new URL(testDatabaseUrl());
    const [host, port] = [target.hostname, Number(target.port || 5432)];
    const marker = Buffer.from(at);
    let proxy!: CuttingProxy;
    const server = createServer((client) => {
      if (proxy.down) return void client.destroy();
      const upstream = connect(port, host);
      proxy.sockets.add(client).add(upstream);
      let armed = false;
      const drop = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('data', (chunk) => {
        if (proxy.cut !== 'none' && chunk.includes(marker)) {
          proxy.cuts++;
          const cut = proxy.cut;
          proxy.cut = 'none';
          if (cut === 'before-commit') return drop();
          armed = true;
        }
        upstream.write(chunk);
      });
      // The server's whole answer to the commit (it flushes at Sync, after committing) is dropped.
      upstream.on('data', (chunk) => (armed ? drop() : client.write(chunk)));
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    target.host = `127.0.0.1:${(server.address() as { port: number }).port}`;
    proxy = new CuttingProxy(server, target.toString());
    return proxy;
  }

  /** Cuts every connection now. */
  cutAll() {
    for (const s of this.sockets) s.destroy();
  }

  async close() {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

const keys: string[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  for (const k of keys.splice(0)) await dropProject(k);
});

async function setUp(inDoubtMs?: number, at?: string) {
  const key = newProjectKey('d');
  keys.push(key);
  const proxy = await CuttingProxy.start(`oc_${key}`, at);
  const store = new PgStore({ url: proxy.url, key, inDoubtMs });
  const direct = new PgStore({ url: testDatabaseUrl(), key });
  closers.push(
    () => store.close(),
    () => direct.close(),
    () => proxy.close(),
  );
  await store.mutate(add('first'));
  return { proxy, store, direct };
}

const add = (message: string) => (d: State) => {
  d.errors.push({ at: 1, message });
  return { changed: true, result: message };
};
const held = async (s: PgStore) => (await s.read()).errors.map((e) => e.message);
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e: unknown) => {
      if (e instanceof RefusalError) return e.refusal;
      throw e;
    },
  );

it('a commit that reached the server but whose answer was lost is answered as done, and held once', async () => {
  const { proxy, store, direct } = await setUp();
  proxy.cut = 'after-commit';
  expect(await store.mutate(add('second'))).toBe('second');
  expect(proxy.cuts).toBe(1);
  expect(await held(direct)).toEqual(['first', 'second']);
  await store.mutate(add('third'));
  expect(await held(store)).toEqual(['first', 'second', 'third']);
  expect(await held(direct)).toEqual(['first', 'second', 'third']);
});

it('a commit cut before the server saw it is refused as not written, and is not held', async () => {
  const { proxy, store, direct } = await setUp();
  proxy.cut = 'before-commit';
  const r = await refusal(store.mutate(add('second')));
  expect(proxy.cuts).toBe(1);
  expect(r?.data?.reason).toBe('state_unreadable');
  expect(r?.message).toMatch(/was not written|nothing was written/);
  expect(await held(direct)).toEqual(['first']);
  await store.mutate(add('third'));
  expect(await held(direct)).toEqual(['first', 'third']);
});

it('a lost answer while the server stays unreachable is refused as unknown, never as not written', async () => {
  const { proxy, store, direct } = await setUp(1_500);
  proxy.cut = 'after-commit';
  proxy.down = true;
  const started = Date.now();
  const r = await refusal(store.mutate(add('second')));
  expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
  expect(r?.data).toMatchObject({ reason: 'state_unreadable', in_doubt: true });
  expect(r?.message).not.toMatch(/nothing was written/);
  expect(r?.message).toMatch(/may have been recorded/);
  // It was committed: once the server answers again, the store shows it, once.
  proxy.down = false;
  expect(await held(direct)).toEqual(['first', 'second']);
  expect(await held(store)).toEqual(['first', 'second']);
});

it('a commit that cannot even connect is taken back out of the cache: the next change is not built on it', async () => {
  const { proxy, store, direct } = await setUp();
  proxy.down = true;
  proxy.cutAll();
  await new Promise((r) => setTimeout(r, 50));
  const r = await refusal(store.mutate(add('second')));
  expect(r?.data?.reason).toBe('state_unreadable');
  proxy.down = false;
  await store.mutate(add('third'));
  expect(await held(direct)).toEqual(['first', 'third']);
  expect(await held(store)).toEqual(['first', 'third']);
});

// A writer whose cache is behind loses its optimistic try and commits under the project's lock:
// the change and COMMIT go in one statement, whose answer can be lost the same ways.
const LOCKED_COMMIT = '; commit;';

it('a commit under the lock whose answer was lost is answered as done, and held once', async () => {
  const { proxy, store, direct } = await setUp(undefined, LOCKED_COMMIT);
  await direct.mutate(add('other'));
  proxy.cut = 'after-commit';
  expect(await store.mutate(add('second'))).toBe('second');
  expect(proxy.cuts).toBe(1);
  expect(await held(direct)).toEqual(['first', 'other', 'second']);
  await store.mutate(add('third'));
  expect(await held(store)).toEqual(['first', 'other', 'second', 'third']);
});

it('a commit under the lock cut before the server saw it is refused as not written, and leaves the lock free', async () => {
  const { proxy, store, direct } = await setUp(undefined, LOCKED_COMMIT);
  await direct.mutate(add('other'));
  proxy.cut = 'before-commit';
  const r = await refusal(store.mutate(add('second')));
  expect(proxy.cuts).toBe(1);
  expect(r?.data?.reason).toBe('state_unreadable');
  expect(r?.message).toMatch(/was not written|nothing was written/);
  const started = Date.now();
  await direct.mutate(add('third'));
  expect(Date.now() - started).toBeLessThan(1_000);
  expect(await held(direct)).toEqual(['first', 'other', 'third']);
  expect(await held(store)).toEqual(['first', 'other', 'third']);
});
