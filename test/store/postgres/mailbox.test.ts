// The mailbox rows stored with every change equal the summary of the state at the head, whatever
// the change (create, join, bind, sends, drains, sweeps, pulls, stale marks, archive) and whichever
// of two processes wrote it; a project laid out before the mailbox gets its rows; and the hook
// runner's glance at the rows triages every hook as the full state does.
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { triage } from '../../../adapters/claude-code/shortcut.ts';
import type { HookContext } from '../../../adapters/claude-code/hook-input.ts';
import type { State } from '../../../src/protocol/schema.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { pgGlance } from '../../../src/store/postgres/glance.ts';
import { Mailbox, type MailboxRow } from '../../../src/store/postgres/mailbox.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { admin, asLayout, dropProject, newProjectKey, storedMailbox, testDatabaseUrl } from '../../helpers/postgres.ts';

const keys: string[] = [];
const runtimes: Runtime[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.close();
  for (const k of keys.splice(0)) await dropProject(k);
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function open(key: string) {
  const rt = new Runtime(new PgStore({ url: testDatabaseUrl(), key }), { log: () => {} });
  runtimes.push(rt);
  return rt;
}

const bySession = (a: MailboxRow, b: MailboxRow) => (a.session_id < b.session_id ? -1 : 1);
const summaryOf = (s: State) => [...Mailbox.of(s).rows.values()].sort(bySession);

/** A folder bound to the project, for the glance; the test server's password through PGPASSWORD. */
async function boundDir(key: string) {
  const dir = await mkdtemp(join(tmpdir(), 'oc-mailbox-'));
  dirs.push(dir);
  const u = new URL(testDatabaseUrl());
  const password = u.password ? decodeURIComponent(u.password) : undefined;
  u.password = '';
  await mkdir(join(dir, '.opencomms'));
  await writeFile(join(dir, '.opencomms', 'store.json'), JSON.stringify({ kind: 'postgres', url: u.href, key }));
  return { binding: join(dir, '.opencomms', 'store.json'), env: password ? { PGPASSWORD: password } : {} };
}

const hooks = (project: string): HookContext[] =>
  (['UserPromptSubmit', 'Stop', 'SessionStart', 'SessionEnd'] as const).flatMap((event) =>
    ['cc-a', 'cc-b', 'cc-new'].map((sid) => ({
      mode: 'event' as const,
      event,
      project,
      host: 'claude-code',
      input: { hook_event_name: event, session_id: sid, prompt: 'next' },
      env: {},
      shell: null,
    })),
  );

const caller = (sid: string, hsid: string | null) => ({
  session_id: sid,
  host: 'claude-code',
  surface: 'mcp',
  delivery_mode: 'pull',
  host_session_id: hsid,
  project_id: 'local-project',
  worktree: '/w',
});

/** Drains `rid` once its channels' retry and cooldown have run out (a swept batch waits
 *  DELIVERY_RETRY_MS before it goes out again), so the step does not depend on the machine's speed. */
async function drainWhenDue(rt: Runtime, rid: string, opts: { max?: number } = {}) {
  const s = await rt.store.read();
  const due = Math.max(
    0,
    ...Object.values(s.channels).flatMap((c) => [c.cooldown_until[rid] ?? 0, c.retry_at[rid] ?? 0]),
  );
  if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now() + 20));
  return rt.run({ op: 'drain', rid, opts });
}

/** Commits what is in flight to `rid` as its holder would (push delivery done). */
async function commitHeld(rt: Runtime, rid: string) {
  const s = await rt.store.read();
  const held = Object.values(s.messages).filter(
    (e) => e.recipient_session_id === rid && e.delivery_status === 'in_flight',
  );
  return rt.run({
    op: 'commit',
    rid,
    message_ids: held.map((e) => e.message_id),
    method: 'push',
    held: { by: held[0]!.in_flight_by!, attempts: held.map((e) => e.attempts) },
  });
}

it('the stored rows equal the summary of the head after every kind of change, from either process', async () => {
  const key = newProjectKey('mb');
  keys.push(key);
  const [a, b] = [open(key), open(key)];
  const { binding, env } = await boundDir(key);
  const steps: [string, Runtime, () => Promise<unknown>][] = [
    [
      'create',
      a,
      () =>
        a.run({
          op: 'create',
          caller: caller('sess_a', 'cc-a'),
          args: { channel: 'team', role: 'A', role_prompt: 'x' },
        }),
    ],
    [
      'join',
      b,
      () =>
        b.run({ op: 'join', caller: caller('sess_b', null), args: { channel: 'team', role: 'B', role_prompt: 'y' } }),
    ],
    ['bind', b, () => b.run({ op: 'bind', member: 'sess_b', host: 'claude-code', host_session_id: 'cc-b' })],
    ['send', a, () => a.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'one' } })],
    ['send', a, () => a.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'two' } })],
    ['drain', b, () => drainWhenDue(b, 'sess_b', { max: 1 })],
    ['sweep', a, () => a.run({ op: 'sweep', alive: () => false })],
    ['drain', a, () => drainWhenDue(a, 'sess_b')],
    ['sweep', b, () => b.run({ op: 'sweep', alive: () => false })],
    ['pull', b, () => b.run({ op: 'pull', sid: 'sess_b', args: { limit: 100 } })],
    ['send', b, () => b.run({ op: 'send', sid: 'sess_b', args: { channel: 'team', content: 'back' } })],
    ['send', a, () => a.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'three' } })],
    ['drain', a, () => drainWhenDue(a, 'sess_b')],
    ['commit', b, () => commitHeld(b, 'sess_b')],
    ['mark_stale', a, () => a.run({ op: 'mark_stale', session: 'sess_b' })],
    ['clear_stale', b, () => b.run({ op: 'clear_stale', session: 'sess_b' })],
    [
      'archive',
      a,
      () =>
        a.run({
          op: 'save_session',
          actor: { sid: 'sess_a', project_id: 'local-project', worktree: '/w' },
          args: { channel: 'team' },
        }),
    ],
  ];
  const seen = new Set<string>();
  for (const [name, rt, step] of steps) {
    const r = (await step()) as { ok: boolean; message: string };
    expect(r.ok, `${name}: ${r.message}`).toBe(true);
    const head = await rt.store.read();
    const want = summaryOf(head);
    expect(await storedMailbox(key), name).toEqual(want);
    // The other process, having caught up, holds the same rows in its mirror.
    const other = rt === a ? b : a;
    expect(summaryOf(await other.store.read()), name).toEqual(want);
    const glance = await pgGlance(binding, env);
    expect(glance.kind, name).toBe('state');
    for (const ctx of hooks('/w'))
      expect(triage(glance, ctx), `${name}: ${ctx.event} ${ctx.input.session_id}`).toBe(
        triage({ kind: 'state', state: head as unknown as Record<string, unknown> }, ctx),
      );
    for (const row of want) {
      if (row.queued) seen.add('queued');
      if (row.in_flight.length) seen.add('in_flight');
      if (row.seats.some((s) => s.stale)) seen.add('stale');
    }
  }
  // The steps reached every part of a row, and the archive left none.
  expect([...seen].sort()).toEqual(['in_flight', 'queued', 'stale']);
  expect(await storedMailbox(key)).toEqual([]);
});

it.each([
  ['before the mailbox (layout 1)', 1 as const],
  ['with each row in one column (layout 2)', 2 as const],
])('a project laid out %s gets the rows of its head on first use', async (_, layout) => {
  const key = newProjectKey('mb');
  keys.push(key);
  const a = open(key);
  await a.run({
    op: 'create',
    caller: caller('sess_a', 'cc-a'),
    args: { channel: 'team', role: 'A', role_prompt: 'x' },
  });
  await a.run({ op: 'join', caller: caller('sess_b', 'cc-b'), args: { channel: 'team', role: 'B', role_prompt: 'y' } });
  await a.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'one' } });
  const want = summaryOf(await a.store.read());
  await admin((c) => c.query(asLayout(key, layout)));
  const { binding, env } = await boundDir(key);
  expect((await pgGlance(binding, env)).kind).toBe('unknown');
  const cold = open(key);
  await cold.store.peek();
  expect(await storedMailbox(key)).toEqual(want);
  expect(want.find((r) => r.session_id === 'sess_b')?.queued).toBe(1);
  expect((await pgGlance(binding, env)).kind).toBe('state');
});
