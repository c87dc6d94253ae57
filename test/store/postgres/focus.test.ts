// Focus (store.ts): a process whose calls name one channel applies the changes of that channel
// and of no one channel only, commits past the other channels' changes without losing its try, and
// takes what it left out the moment a call needs the whole project. Real PostgreSQL, real engine:
// whatever the interleaving, a focused process's whole read equals a fresh process's, and nothing sent is
// lost or shown twice.
import { afterEach, expect, it } from 'vitest';
import type { Caller } from '../../../src/engine/index.ts';
import type { State } from '../../../src/protocol/schema.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { admin, dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

const keys: string[] = [];
const runtimes: Runtime[] = [];
afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.close();
  for (const k of keys.splice(0)) await dropProject(k);
});

const caller = (sid: string): Caller => ({
  session_id: sid,
  host: 'host-pull',
  surface: 'cli',
  delivery_mode: 'pull',
  host_session_id: sid,
  project_id: 'p',
  worktree: '/srv/project',
});

function project(snapshotEvery?: number) {
  const key = newProjectKey('focus');
  keys.push(key);
  const open = () => {
    const store = new PgStore({ url: testDatabaseUrl(), key, ...(snapshotEvery ? { snapshotEvery } : {}) });
    const rt = new Runtime(store, { log: () => {} });
    runtimes.push(rt);
    return { rt, store };
  };
  return { key, open };
}

async function ok(p: Promise<{ ok: boolean; message: string; data?: unknown }>) {
  const r = await p;
  expect(r.ok, r.message).toBe(true);
  return r;
}

/** Channel `name` with writer `<name>-w` and reader `<name>-r`. */
async function channel(rt: Runtime, name: string) {
  await ok(
    rt.run({
      op: 'create',
      caller: caller(`${name}-w`),
      args: { channel: name, role: 'W', role_prompt: 'w', rate_limit: 1000 },
    }),
  );
  await ok(rt.run({ op: 'join', caller: caller(`${name}-r`), args: { channel: name, role: 'R', role_prompt: 'r' } }));
}

const send = (rt: Runtime, name: string, content: string) =>
  ok(rt.run({ op: 'send', sid: `${name}-w`, args: { channel: name, content } }));

const pulled = async (rt: Runtime, name: string): Promise<string[]> => {
  const r = (await ok(rt.run({ op: 'pull', sid: `${name}-r`, args: { limit: 100 } }))) as { data?: unknown };
  const messages = (r.data as { messages?: { framed: string }[] }).messages ?? [];
  // Each content is one word inside its frame.
  return messages.map((m) => /\b[lrxy][0-9-]+\b/.exec(m.framed.split('\n').slice(1).join('\n'))?.[0] ?? m.framed);
};

const channelOf = (key: string) =>
  admin(
    async (c) =>
      (await c.query(`select seq::int, channel from "oc_${key}".changes order by seq`)).rows as {
        seq: number;
        channel: string | null;
      }[],
  );

/** What a state holds, without what differs by who loaded it. */
const comparable = (s: Readonly<State>) => JSON.parse(JSON.stringify(s)) as unknown;

it('two writers on two channels of one project: each commits past the other’s changes, applies none of them, and a whole read has them all', async () => {
  const { key, open } = project();
  const [a, b] = [open(), open()];
  await channel(a.rt, 'left');
  await channel(a.rt, 'right');
  for (let i = 0; i < 5; i++) {
    await send(a.rt, 'left', `l${i}`);
    await send(b.rt, 'right', `r${i}`);
  }
  // Each send named one channel: its change names it too.
  const rows = await channelOf(key);
  expect(rows.slice(-10).map((r) => r.channel)).toEqual(
    Array.from({ length: 10 }, (_, i) => (i % 2 ? 'right' : 'left')),
  );
  // `a` focuses on "left": the envelopes of "right" never reached it; a whole read fetches them.
  const onLeft = await a.store.peek((s) => (s.channels.left ? 'left' : null));
  const contents = (s: Readonly<State>) =>
    Object.values(s.messages)
      .map((m) => m.content)
      .sort();
  expect(contents(onLeft)).toEqual(['l0', 'l1', 'l2', 'l3', 'l4']);
  const fresh = open();
  expect(comparable(await a.store.peek())).toEqual(comparable(await fresh.store.peek()));
  expect(contents(await a.store.peek())).toHaveLength(10);
  expect(await pulled(b.rt, 'left')).toEqual(['l0', 'l1', 'l2', 'l3', 'l4']);
  expect(await pulled(a.rt, 'right')).toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
});

it('a change of no one channel is applied after the changes left out before it; every interleaving ends as a fresh load, with nothing lost or twice', async () => {
  for (const seed of [1, 2, 3]) {
    const { open } = project(7);
    const [a, b, c] = [open(), open(), open()];
    await channel(c.rt, 'x');
    await channel(c.rt, 'y');
    let rnd = seed;
    const next = () => (rnd = (rnd * 1103515245 + 12345) % 2147483648) / 2147483648;
    const sent: Record<string, string[]> = { x: [], y: [] };
    const got: Record<string, string[]> = { x: [], y: [] };
    for (let i = 0; i < 50; i++) {
      // `a` works on x, `b` on y, `c` on both: a and b focus on one channel each.
      const name = next() < 0.5 ? 'x' : 'y';
      const roll = next();
      const who = next() < 0.3 ? c : name === 'x' ? a : b;
      if (roll < 0.6) {
        const content = `${name}${seed}-${i}`;
        await send(who.rt, name, content);
        sent[name]!.push(content);
      } else if (roll < 0.8) got[name]!.push(...(await pulled(who.rt, name)));
      // Changes of no one channel: an error recorded, a member joining and leaving.
      else if (roll < 0.9) await ok(who.rt.run({ op: 'record_error', entry: { at: i, message: `e${i}` } }));
      else {
        await ok(
          who.rt.run({
            op: 'join',
            caller: caller(`extra-${i}`),
            args: { channel: name, role: `E${i}`, role_prompt: 'e' },
          }),
        );
        await ok(who.rt.run({ op: 'disconnect', sid: `extra-${i}`, args: { channel: name } }));
      }
    }
    for (const name of ['x', 'y']) got[name]!.push(...(await pulled(a.rt, name)));
    expect(got).toEqual(sent);
    const fresh = comparable(await open().store.peek());
    for (const p of [a, b, c]) expect(comparable(await p.store.peek())).toEqual(fresh);
  }
});

it('a scoped change that writes beyond its channel is a change of no one channel', async () => {
  const { key, open } = project();
  const a = open();
  await channel(a.rt, 'only');
  await a.store.mutate(
    (d) => {
      d.errors.push({ at: 1, message: 'beyond the channel' });
      return { changed: true, result: null };
    },
    (s) => (s.channels.only ? 'only' : null),
  );
  expect((await channelOf(key)).at(-1)!.channel).toBeNull();
  await send(a.rt, 'only', 'within');
  expect((await channelOf(key)).at(-1)!.channel).toBe('only');
});

it('a process with a focus is told of their changes and of changes of no one channel, not of another channel’s', async () => {
  const { open } = project();
  const [a, b] = [open(), open()];
  await channel(b.rt, 'mine');
  await channel(b.rt, 'other');
  const told: number[] = [];
  await a.store.peek();
  a.store.focus((s) => (s.channels.mine ? ['mine'] : []));
  const sub = await a.store.subscribe(
    async () => void told.push(Date.now()),
    () => {},
  );
  await a.store.peek('focus');
  const settle = () => new Promise((r) => setTimeout(r, 300));
  await settle();
  told.length = 0;
  await send(b.rt, 'other', 'not for a');
  await settle();
  expect(told).toHaveLength(0);
  await send(b.rt, 'mine', 'for a');
  await settle();
  expect(told.length).toBeGreaterThan(0);
  const seen = await a.store.peek('focus');
  expect(Object.values(seen.messages).map((m) => m.content)).toEqual(['for a']);
  // A join (a change of no one channel) is told too.
  told.length = 0;
  await ok(
    b.rt.run({ op: 'join', caller: caller('mine-r'), args: { channel: 'other', role: 'R2', role_prompt: 'r' } }),
  );
  await settle();
  expect(told.length).toBeGreaterThan(0);
  await sub.close();
});
