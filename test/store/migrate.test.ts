import { access, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileStore } from '../../src/store/file/store.ts';
import { V1_ROLE_PROMPT, forgetMigrationMemo } from '../../src/store/file/migrate.ts';
import { channel, entriesOf, incrementCounter, member, tempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let cleanup: () => Promise<void>;
const stores: FileStore[] = [];
const open = () => {
  const s = new FileStore(dir);
  stores.push(s);
  return s;
};
beforeEach(async () => ({ dir, cleanup } = await tempProject()));
afterEach(async () => {
  forgetMigrationMemo();
  for (const s of stores.splice(0)) s.close();
  await cleanup();
});

const oc = (...p: string[]) => join(dir, '.opencomms', ...p);
const legacyFile = () => join(dir, '.opencode-comms', 'state.json');
const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

const v1Member = (session_id: string, role: string, extra: Record<string, unknown> = {}) => ({
  session_id,
  role,
  joined_at: 1111,
  ...extra,
});
const v1State = (channels: Record<string, unknown>) => ({
  schema_version: 1,
  channels,
  messages: {},
  queues: {},
  delivered_to: {},
  errors: [{ at: 5, message: 'old v1 error' }],
});
async function putLegacy(doc: unknown): Promise<Buffer> {
  await mkdir(join(dir, '.opencode-comms'), { recursive: true });
  const bytes = Buffer.from(typeof doc === 'string' ? doc : JSON.stringify(doc, null, 2));
  await writeFile(legacyFile(), bytes);
  return bytes;
}
async function putV2(state: Record<string, unknown>) {
  await mkdir(oc(), { recursive: true });
  const doc = { schema_version: 2, channels: {}, messages: {}, queues: {}, delivered_to: {}, errors: [], ...state };
  await writeFile(oc('state.json'), JSON.stringify(doc));
  return Buffer.from(JSON.stringify(doc));
}

describe('schema 1 → 2 migration', () => {
  it('migrates once: marker, v1 backup, legacy untouched, rebuilt members', async () => {
    const legacy = await putLegacy(
      v1State({
        review: {
          name: 'review',
          members: [v1Member('ses_1', 'Reviewer', { role_prompt: 'Review.' }), v1Member('ses_2', 'Author')],
        },
      }),
    );
    const s = await open().read();
    const [a, b] = s.channels.review!.members;
    expect(a).toMatchObject({
      session_id: 'ses_1',
      role: 'Reviewer',
      role_prompt: 'Review.',
      joined_at: 1111,
      host: 'opencode-comms',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: 'ses_1',
      stale_policy: { mode: 'window', window_ms: 300000 },
    });
    expect(b!.role_prompt).toBe(V1_ROLE_PROMPT);
    expect(s.channels.review!.id).toMatch(/^chn_[0-9a-f]{32}$/);
    expect(s.channels.review!).toMatchObject({ project_id: 'local-project', worktree: dir });
    expect(s.errors.map((e) => e.message)).toEqual([
      'old v1 error',
      expect.stringMatching(/Migrated \.opencode-comms\/state\.json \(schema 1\).*state\.v1\.bak\.json.*left in place/),
    ]);
    expect(await readFile(legacyFile())).toEqual(legacy);
    expect(await readFile(oc('state.v1.bak.json'))).toEqual(legacy);
    const marker = JSON.parse(await readFile(oc('MIGRATED_FROM_V1'), 'utf8'));
    expect(marker).toEqual({ migrated_at: expect.any(Number), from: '.opencode-comms', schema: 1 });
    expect(await exists(oc('state.v2.empty.bak.json'))).toBe(false);

    // Never twice: even after the migrated channel is gone, a new process does not re-import it.
    await open().mutate((d) => {
      d.channels = {};
      return { changed: true, result: null };
    });
    expect((await open().read()).channels).toEqual({});
    expect(await readFile(legacyFile())).toEqual(legacy);
  });

  it('replaces a same-name empty placeholder (backed up), keeps the other placeholders and their errors', async () => {
    await putLegacy(v1State({ review: { name: 'review', members: [v1Member('ses_1', 'Reviewer')] } }));
    const placeholder = await putV2({
      channels: { review: channel('review'), other: channel('other') },
      errors: [{ at: 7, message: 'placeholder error' }],
    });
    const s = await open().mutate((d) => ({ changed: false, result: d }));
    expect(s.channels.review!.members).toHaveLength(1);
    expect(s.channels.other!.members).toEqual([]);
    expect(s.errors.map((e) => e.message)).toEqual([
      'old v1 error',
      'placeholder error',
      expect.stringMatching(/^Migrated/),
    ]);
    expect(await readFile(oc('state.v2.empty.bak.json'))).toEqual(placeholder);
    expect(await exists(oc('MIGRATED_FROM_V1'))).toBe(true);
  });

  it('never overwrites real v2 state; writes no marker', async () => {
    await putLegacy(v1State({ review: { name: 'review', members: [v1Member('ses_1', 'Reviewer')] } }));
    const real = await putV2({ channels: { work: channel('work', [member('sess_x', 'Lead')]) } });
    const s = await open().read();
    expect(Object.keys(s.channels)).toEqual(['work']);
    expect(await readFile(oc('state.json'))).toEqual(real); // the load wrote nothing
    await open().mutate(incrementCounter);
    expect(await exists(oc('MIGRATED_FROM_V1'))).toBe(false);
    expect(await exists(oc('state.v1.bak.json'))).toBe(false);
    expect(JSON.parse(await readFile(oc('state.json'), 'utf8')).channels.work.members).toHaveLength(1);
  });

  const tampered: [string, unknown][] = [
    ['a member with a bad role', v1State({ review: { name: 'review', members: [v1Member('ses_1', '9 bad!')] } })],
    [
      'a member without session_id',
      v1State({ review: { name: 'review', members: [{ role: 'Reviewer', joined_at: 1 }] } }),
    ],
    [
      'a non-numeric joined_at',
      v1State({ review: { name: 'review', members: [v1Member('s', 'Reviewer', { joined_at: 'x' })] } }),
    ],
    ['a key that is not the name', v1State({ review: { name: 'other', members: [] } })],
    ['garbage', '{nope'],
  ];
  for (const [label, doc] of tampered)
    it(`never migrates a tampered v1 file (${label}): error recorded once, no marker, legacy untouched`, async () => {
      const legacy = await putLegacy(doc);
      const s = await open().read();
      expect(s.channels).toEqual({});
      const rejected = s.errors.filter((e) => /rejected and left untouched/.test(e.message));
      expect(rejected).toHaveLength(1);
      expect(rejected[0]!.message).toContain('.opencode-comms/state.json');
      expect(await exists(oc('MIGRATED_FROM_V1'))).toBe(false);
      expect(await exists(oc('state.v1.bak.json'))).toBe(false);
      expect(await readFile(legacyFile())).toEqual(legacy);
      // Later loads, in this process or a fresh one, neither re-record the error nor rewrite state.json.
      const written = await stat(oc('state.json'), { bigint: true });
      await open().read();
      forgetMigrationMemo();
      await open().read();
      await open().mutate(() => ({ changed: false, result: null }));
      const again = await stat(oc('state.json'), { bigint: true });
      expect([again.ino, again.mtimeNs]).toEqual([written.ino, written.mtimeNs]);
      expect((await open().read()).errors.filter((e) => /rejected and left untouched/.test(e.message))).toHaveLength(1);
    });

  it('migrates a repaired legacy file after an earlier rejection', async () => {
    await putLegacy(v1State({ review: { name: 'review', members: [v1Member('ses_1', '9 bad!')] } }));
    await open().read();
    await putLegacy(v1State({ review: { name: 'review', members: [v1Member('ses_1', 'Reviewer')] } }));
    const s = await open().read();
    expect(s.channels.review!.members).toHaveLength(1);
    expect(await exists(oc('MIGRATED_FROM_V1'))).toBe(true);
  });

  it('with no legacy directory nothing happens and nothing is logged', async () => {
    const s = await open().read();
    expect(s.errors).toEqual([]);
    expect(await exists(oc())).toBe(false);
    await open().mutate(incrementCounter);
    expect((await entriesOf(oc())).sort()).toEqual(['.gitignore', 'journal', 'state.json']); // the snapshot's journal, created before it
    expect((await open().read()).errors).toEqual([{ at: 0, message: '1' }]);
  });

  it('an incompatible v2 file blocks migration and stays untouched', async () => {
    await putLegacy(v1State({ review: { name: 'review', members: [v1Member('ses_1', 'Reviewer')] } }));
    await mkdir(oc(), { recursive: true });
    await writeFile(oc('state.json'), '{"schema_version": 3}');
    await expect(open().read()).rejects.toMatchObject({ refusal: { data: { reason: 'state_incompatible' } } });
    expect(await readFile(oc('state.json'), 'utf8')).toBe('{"schema_version": 3}');
    expect(await exists(oc('MIGRATED_FROM_V1'))).toBe(false);
  });
});
