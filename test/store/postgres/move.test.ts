// `opencomms store migrate --to <url>`: a live file project (channels, pending mail, history, an
// archive) moves into PostgreSQL whole; the folder is then bound there; a process that still
// holds the files refuses to write; a target that holds a project already is refused.
import { afterEach, expect, it } from 'vitest';
import type { RefusalError } from '../../../src/protocol/result.ts';
import { openRuntime } from '../../../src/runtime/runtime.ts';
import { Mailbox, type MailboxRow } from '../../../src/store/postgres/mailbox.ts';
import { FileStore } from '../../../src/store/store.ts';
import { cli, liveProject } from '../../cli/fixtures.ts';
import { admin, dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';
import { tempProject } from '../../helpers/store-fixtures.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function passwordless() {
  const u = new URL(testDatabaseUrl());
  if (u.password) process.env.PGPASSWORD = decodeURIComponent(u.password);
  u.password = '';
  return u.toString();
}

it('moves state, history and archives; binds the folder; the old files refuse writes; a taken key is refused', async () => {
  const key = newProjectKey('v');
  cleanups.push(() => dropProject(key));
  const t = await tempProject();
  cleanups.push(t.cleanup);
  await liveProject(t.dir);
  const stale = new FileStore(t.dir);
  await stale.read();
  const before = await stale.read();
  const archivesBefore = (await stale.archives()).archives.map((a) => a.channel_id);
  const url = passwordless();
  const r = await cli('store', 'migrate', '--to', url, '--key', key, '--json', '--project', t.dir);
  expect(r.json()).toMatchObject({ ok: true, data: { key, archives: 1 } });
  const rt = openRuntime(t.dir);
  expect(await rt.read()).toEqual(before);
  // The mailbox rows the hook runner reads came along: those of the moved state.
  const rows = await admin((c) => c.query<{ summary: MailboxRow }>(`select summary from "oc_${key}".mailbox`));
  const bySession = (a: MailboxRow, b: MailboxRow) => (a.session_id < b.session_id ? -1 : 1);
  const moved = rows.rows.map((x) => x.summary).sort(bySession);
  expect(moved).toEqual([...Mailbox.of(before).rows.values()].sort(bySession));
  expect(moved.some((m) => m.queued > 0)).toBe(true);
  expect(
    ((await cli('status', '--json', '--project', t.dir)).json().data.channels as Array<{ name: string }>)
      .map((c) => c.name)
      .sort(),
  ).toEqual(['empty', 'team']);
  await rt.close();
  expect((await cli('store', 'status', '--json', '--project', t.dir)).json().data).toMatchObject({
    store: 'postgres',
    key,
  });
  const e = await stale
    .mutate((d) => {
      d.errors.push({ at: 1, message: 'split' });
      return { changed: true, result: null };
    })
    .catch((x: unknown) => x);
  expect((e as RefusalError).refusal.data?.reason).toBe('state_incompatible');
  await stale.close();
  const { PgStore } = await import('../../../src/store/postgres/store.ts');
  const pgs = new PgStore({ url, key });
  expect((await pgs.archives()).archives.map((a) => a.channel_id)).toEqual(archivesBefore);
  await pgs.close();
  // A second folder cannot move into the same key.
  const t2 = await tempProject();
  cleanups.push(t2.cleanup);
  await liveProject(t2.dir);
  const again = await cli('store', 'migrate', '--to', url, '--key', key, '--json', '--project', t2.dir);
  expect(again.json()).toMatchObject({ ok: false, data: { reason: 'invalid_argument' } });
  expect(again.json().message).toMatch(/already holds a project/);
});
