// `opencomms store migrate --to <url>`: a live file project (channels, pending mail, history, an
// archive) moves into PostgreSQL whole; the folder is then bound there; a process that still
// holds the files refuses to write; a target that holds a project already is refused.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { RefusalError } from '../../../src/protocol/result.ts';
import type { Envelope } from '../../../src/protocol/schema.ts';
import { openRuntime } from '../../../src/runtime/runtime.ts';
import { Mailbox } from '../../../src/store/postgres/mailbox.ts';
import { FileStore } from '../../../src/store/file/store.ts';
import { appendHistory, closeHistoryLogs } from '../../../src/store/file/history-log.ts';
import { resolvePaths } from '../../../src/store/index.ts';
import { cli, IDS, liveProject } from '../../cli/fixtures.ts';
import { dropProject, newProjectKey, storedMailbox, testDatabaseUrl } from '../../helpers/postgres.ts';
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

/** A live project on the file store (liveProject) in a folder of its own, and a fresh project key
 *  on PostgreSQL for it: both gone after the test. */
async function liveOnFiles(prefix: string) {
  const key = newProjectKey(prefix);
  cleanups.push(() => dropProject(key));
  const t = await tempProject();
  cleanups.push(t.cleanup);
  await liveProject(t.dir);
  return { key, dir: t.dir };
}

it('moves state, history and archives; binds the folder; the old files refuse writes; a taken key is refused', async () => {
  const { key, dir } = await liveOnFiles('v');
  const stale = new FileStore(dir);
  await stale.read();
  const before = await stale.read();
  const archivesBefore = (await stale.archives()).archives.map((a) => a.channel_id);
  const url = passwordless();
  const r = await cli('store', 'migrate', '--to', url, '--key', key, '--json', '--project', dir);
  expect(r.json()).toMatchObject({ ok: true, data: { key, archives: 1 } });
  const rt = openRuntime(dir);
  expect(await rt.read()).toEqual(before);
  // The mailbox rows the hook runner reads came along: those of the moved state.
  const moved = await storedMailbox(key);
  expect(moved).toEqual([...Mailbox.of(before).rows.values()].sort((a, b) => (a.session_id < b.session_id ? -1 : 1)));
  expect(moved.some((m) => m.queued > 0)).toBe(true);
  expect(
    ((await cli('status', '--json', '--project', dir)).json().data.channels as Array<{ name: string }>)
      .map((c) => c.name)
      .sort(),
  ).toEqual(['empty', 'team']);
  await rt.close();
  expect((await cli('store', 'status', '--json', '--project', dir)).json().data).toMatchObject({
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
  // Whole, not the listing's heads.
  for (const id of archivesBefore) expect(await pgs.archive(id)).toEqual(await new FileStore(dir).archive(id));
  await pgs.close();
  // A second folder cannot move into the same key.
  const t2 = await tempProject();
  cleanups.push(t2.cleanup);
  await liveProject(t2.dir);
  const again = await cli('store', 'migrate', '--to', url, '--key', key, '--json', '--project', t2.dir);
  expect(again.json()).toMatchObject({ ok: false, data: { reason: 'invalid_argument' } });
  expect(again.json().message).toMatch(/already holds a project/);
});

it('a history log holding an envelope twice (appended again after a crash before its state) moves; each is read once, on either store', async () => {
  const { key, dir } = await liveOnFiles('v');
  const rt = openRuntime(dir);
  expect((await rt.run({ op: 'pull', sid: IDS.reviewer, args: { limit: 100 } })).ok).toBe(true);
  await rt.close();
  const file = new FileStore(dir);
  const ids = Object.values((await file.read()).channels).map((c) => c.id);
  const logged = new Map<string, Envelope[]>();
  for (const id of ids) logged.set(id, await file.history(id, 100));
  const [channel, log] = [...logged].find(([, l]) => l.length > 0)!;
  appendHistory(resolvePaths(dir), [log[0]!]);
  closeHistoryLogs(resolvePaths(dir));
  expect(await file.history(channel, 100)).toEqual(log);
  await file.close();
  const r = await cli('store', 'migrate', '--to', passwordless(), '--key', key, '--json', '--project', dir);
  expect(r.json()).toMatchObject({ ok: true, data: { key, history: [...logged.values()].flat().length } });
  const { PgStore } = await import('../../../src/store/postgres/store.ts');
  const pgs = new PgStore({ url: testDatabaseUrl(), key });
  expect(await pgs.history(channel, 100)).toEqual(log);
  await pgs.close();
});

it('moves back to files: nothing accepted on PostgreSQL is lost, and a process still on it is refused', async () => {
  const { key, dir } = await liveOnFiles('b');
  const url = passwordless();
  expect((await cli('store', 'migrate', '--to', url, '--key', key, '--json', '--project', dir)).json().ok).toBe(true);
  // Work accepted on PostgreSQL: a pull (history), a send left pending, a member joining.
  const onPg = openRuntime(dir);
  const { PgStore } = await import('../../../src/store/postgres/store.ts');
  const live = new PgStore({ url, key });
  await live.read();
  expect((await onPg.run({ op: 'pull', sid: IDS.reviewer, args: { limit: 100 } })).ok).toBe(true);
  expect(
    (
      await onPg.run({
        op: 'send',
        sid: IDS.lead,
        args: { channel: 'team', content: 'after the move', to: 'Reviewer' },
      })
    ).ok,
  ).toBe(true);
  // A session run and saved on PostgreSQL: its archive holds the message sent in it.
  const op = { operator: true as const, project_id: 'cli-local-project', worktree: dir };
  const caller = (session_id: string) => ({
    session_id,
    host: 'claude-code',
    surface: 'mcp',
    delivery_mode: 'pull',
    host_session_id: null,
    project_id: 'local-project',
    worktree: dir,
  });
  const steps = [
    { op: 'create_session', actor: op, args: { channel: 'later' } },
    { op: 'join', caller: caller(IDS.lead), args: { channel: 'later', role: 'Lead', role_prompt: 'Lead it.' } },
    { op: 'join', caller: caller(IDS.reviewer), args: { channel: 'later', role: 'Reviewer', role_prompt: 'Review.' } },
    { op: 'send', sid: IDS.lead, args: { channel: 'later', content: 'saved on pg', to: 'Reviewer' } },
    { op: 'save_session', actor: op, args: { channel: 'later', summary: 'Saved on PostgreSQL.' } },
  ];
  for (const step of steps) expect(await onPg.run(step as Parameters<typeof onPg.run>[0])).toMatchObject({ ok: true });
  const before = await onPg.read();
  const teamId = Object.values(before.channels).find((c) => c.name === 'team')!.id;
  const historyBefore = await onPg.store.history(teamId, 100);
  expect(historyBefore.map((e) => e.content)).toEqual(['please review']);
  const archivesBefore = (await onPg.store.archives()).archives;
  expect(archivesBefore.map((a) => a.name).sort()).toEqual(['later', 'old']);
  const archived = await Promise.all(archivesBefore.map((a) => onPg.store.archive(a.channel_id)));
  expect(archived.flatMap((a) => a!.messages.map((m) => m.content))).toEqual(['saved on pg']);

  const r = await cli('store', 'migrate', '--to', 'file', '--json', '--project', dir);
  expect(r.json()).toMatchObject({ ok: true, data: { store: 'file', history: 1, archives: 2 } });
  expect(r.json().data.set_aside).toMatch(/^\.opencomms\/retired-/);
  expect((await cli('store', 'status', '--json', '--project', dir)).json().data).toEqual({ store: 'file' });
  const back = openRuntime(dir);
  expect(await back.read()).toEqual(before);
  expect(await back.store.history(teamId, 100)).toEqual(historyBefore);
  const archivesBack = (await back.store.archives()).archives;
  expect(archivesBack.map((a) => a.channel_id).sort()).toEqual(archived.map((a) => a!.channel_id).sort());
  for (const a of archived) expect(await back.store.archive(a!.channel_id)).toEqual(a);
  // The files are live: the pending message is pulled from them.
  const pulled = await back.run({ op: 'pull', sid: IDS.reviewer, args: { limit: 100 } });
  expect(JSON.stringify(pulled)).toContain('after the move');
  await back.close();

  // Every process still on the PostgreSQL project is refused, reads and writes alike.
  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: RefusalError) => e.refusal,
    );
  for (const e of [await refusal(live.read()), await refusal(live.mutate(() => ({ changed: false, result: 0 })))]) {
    expect(e?.data).toEqual({ reason: 'state_incompatible', retired: true });
    expect(e?.message).toMatch(/retired: the project moved to the files at .*Restart this process/);
  }
  const sent = await onPg.run({
    op: 'send',
    sid: IDS.lead,
    args: { channel: 'team', content: 'split', to: 'Reviewer' },
  });
  expect(sent).toMatchObject({ ok: false, data: { reason: 'state_incompatible' } });
  await onPg.close();
  await live.close();
  // A fresh process on the retired project, and a second move out of it, are refused too.
  const fresh = new PgStore({ url, key });
  expect((await refusal(fresh.read()))?.data?.reason).toBe('state_incompatible');
  await fresh.close();
  const t2 = await tempProject();
  cleanups.push(t2.cleanup);
  // `store init` refuses the retired key; a folder bound to it before the move is refused too.
  const init = await cli('store', 'init', url, '--key', key, '--json', '--project', t2.dir);
  expect(init.json()).toMatchObject({ ok: false, data: { reason: 'state_incompatible', retired: true } });
  mkdirSync(join(t2.dir, '.opencomms'), { recursive: true });
  writeFileSync(join(t2.dir, '.opencomms', 'store.json'), JSON.stringify({ kind: 'postgres', url, key }));
  const again = await cli('store', 'migrate', '--to', 'file', '--json', '--project', t2.dir);
  expect(again.json()).toMatchObject({ ok: false, data: { reason: 'state_incompatible' } });
  expect(again.json().message).toMatch(/retired/);
  // Its key stays taken.
  const into = await cli('store', 'migrate', '--to', url, '--key', key, '--json', '--project', dir);
  expect(into.json()).toMatchObject({ ok: false, data: { reason: 'invalid_argument' } });
  expect(into.json().message).toMatch(/already holds a project/);
  // A folder on files has nothing to move back.
  const onFiles = await cli('store', 'migrate', '--to', 'file', '--json', '--project', dir);
  expect(onFiles.json()).toMatchObject({ ok: false, data: { reason: 'invalid_argument' } });
});
