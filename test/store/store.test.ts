import { mkdir, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RefusalError } from '../../src/protocol/result.ts';
import type { State } from '../../src/protocol/schema.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { storeStats } from '../../src/store/file/state-file.ts';
import { channel, counterOf, entriesOf, incrementCounter, member, tempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let cleanup: () => Promise<void>;
let store: FileStore;
beforeEach(async () => {
  ({ dir, cleanup } = await tempProject());
  store = new FileStore(dir);
});
afterEach(async () => {
  store.close();
  await cleanup();
});

const reasonOf = async (p: Promise<unknown>) => {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(RefusalError);
  return (e as RefusalError).refusal.data!.reason;
};
const addChannel = (name: string) => (d: State) => {
  d.channels[name] = channel(name, [member('sess_a', 'Reviewer')]) as never;
  return { changed: true, result: null };
};

describe('persist and reload', () => {
  it('an absent file reads as empty and writes nothing', async () => {
    expect(await store.read()).toEqual({
      schema_version: 2,
      channels: {},
      messages: {},
      queues: {},
      delivered_to: {},
      errors: [],
    });
    await expect(stat(join(dir, '.opencomms'))).rejects.toThrow();
  });

  it('gives back the same state from a new store; no temp left; .gitignore on first creation', async () => {
    await store.mutate(addChannel('alpha'));
    const mine = await store.read();
    const other = new FileStore(dir);
    expect(await other.read()).toEqual(mine);
    other.close();
    expect(mine.channels.alpha!.members[0]!.endpoint_capabilities.pull).toBe(true); // backfilled
    const files = await entriesOf(join(dir, '.opencomms'));
    expect(files.filter((f) => f.endsWith('.tmp'))).toEqual([]);
    expect(await readFile(join(dir, '.opencomms', '.gitignore'), 'utf8')).toBe('*\n');
    const text = await readFile(join(dir, '.opencomms', 'state.json'), 'utf8');
    expect(text).toContain('\n  "channels": {'); // pretty, 2-space
  });

  it('does not rewrite a .gitignore the user changed', async () => {
    await store.mutate(addChannel('alpha'));
    await writeFile(join(dir, '.opencomms', '.gitignore'), 'mine\n');
    await new FileStore(dir).mutate(addChannel('beta'));
    expect(await readFile(join(dir, '.opencomms', '.gitignore'), 'utf8')).toBe('mine\n');
  });

  it('writes nothing when fn reports no change or throws', async () => {
    await store.mutate(addChannel('alpha'));
    const before = await readFile(join(dir, '.opencomms', 'state.json'));
    await store.mutate((d) => {
      d.channels = {};
      return { changed: false, result: 1 };
    });
    await expect(
      store.mutate((d) => {
        d.channels = {};
        throw new Error('engine bug');
      }),
    ).rejects.toThrow('engine bug');
    expect(await readFile(join(dir, '.opencomms', 'state.json'))).toEqual(before);
    expect(Object.keys((await store.read()).channels)).toEqual(['alpha']); // cache not poisoned by the draft
  });

  it('refuses to save a draft that other processes would load as corrupt', async () => {
    await store.mutate(addChannel('alpha'));
    const before = await readFile(join(dir, '.opencomms', 'state.json'));
    await expect(
      store.mutate((d) => {
        d.channels.alpha!.members[0]!.role = '!!';
        return { changed: true, result: null };
      }),
    ).rejects.toThrow(/invalid state.*role/);
    expect(await readFile(join(dir, '.opencomms', 'state.json'))).toEqual(before);
  });

  it('checks an append by its new items, and a list with a length bound whole', async () => {
    await store.mutate(addChannel('alpha'));
    await store.mutate((d) => {
      d.channels.alpha!.processed_correlations.push('cor_1');
      return { changed: true, result: null };
    });
    expect((await new FileStore(dir).read()).channels.alpha!.processed_correlations).toEqual(['cor_1']);
    await expect(
      store.mutate((d) => {
        d.channels.alpha!.processed_correlations.push(42 as never);
        return { changed: true, result: null };
      }),
    ).rejects.toThrow(/invalid state.*processed_correlations/);
    await expect(
      store.mutate((d) => {
        for (let i = 0; i < 40; i++) d.channels.alpha!.members.push(member(`sess_m${i}`, 'Peer') as never);
        return { changed: true, result: null };
      }),
    ).rejects.toThrow(/invalid state.*members/);
    expect((await new FileStore(dir).read()).channels.alpha!.members).toHaveLength(1);
  });

  it('planned operations are applied, checked and journaled as a replay applies them', async () => {
    await store.mutate(addChannel('alpha'));
    const before = await readFile(join(dir, '.opencomms', 'state.json'));
    await store.mutate(() => ({
      changed: true,
      result: null,
      ops: [['a', ['channels', 'alpha', 'processed_correlations'], ['cor_1']]],
    }));
    expect((await new FileStore(dir).read()).channels.alpha!.processed_correlations).toEqual(['cor_1']);
    // An invalid plan is refused whole and leaves memory as it was.
    await expect(
      store.mutate(() => ({
        changed: true,
        result: null,
        ops: [
          ['s', ['channels', 'alpha', 'processed_correlations'], 'x'],
          ['a', ['queues', 'sess_a'], ['ocm_1']],
        ],
      })),
    ).rejects.toThrow(/invalid state.*processed_correlations/);
    expect((await store.read()).queues).toEqual({});
    // Writes through the draft beside planned operations would be lost: refused, nothing written.
    await expect(
      store.mutate((d) => {
        d.channels.alpha!.description = 'through the draft';
        return { changed: true, result: null, ops: [['s', ['channels', 'alpha', 'description'], 'planned']] };
      }),
    ).rejects.toThrow(/both wrote through its draft and planned/);
    expect((await store.read()).channels.alpha!.description).toBeNull();
    expect(await readFile(join(dir, '.opencomms', 'state.json'))).toEqual(before); // the journal holds the one good line
    expect((await new FileStore(dir).read()).channels.alpha!.processed_correlations).toEqual(['cor_1']);
  });

  it('in-process concurrent mutations are serialized', async () => {
    await Promise.all(Array.from({ length: 50 }, () => store.mutate(incrementCounter)));
    expect(counterOf(await new FileStore(dir).read())).toBe(50);
  });
});

describe('fast path', () => {
  it('after its own save this process does not re-parse; an external write is picked up', async () => {
    await store.mutate(incrementCounter);
    const parses = storeStats.parses;
    for (let i = 0; i < 5; i++) await store.mutate(incrementCounter);
    expect(await store.read()).toMatchObject({ errors: [{ message: '6' }] });
    expect(storeStats.parses).toBe(parses);

    // Same size, written in place by another writer: must be seen (compacted first, so that the
    // counter is in state.json rather than in the journal).
    await store.compact();
    const file = join(dir, '.opencomms', 'state.json');
    const text = await readFile(file, 'utf8');
    await writeFile(file, text.replace('"message": "6"', '"message": "7"'));
    expect(await store.mutate(incrementCounter)).toBe(8);
    expect(storeStats.parses).toBe(parses + 1);

    // Replaced by another store (a new inode).
    const other = new FileStore(dir);
    await other.mutate(incrementCounter);
    other.close();
    expect(await store.mutate(incrementCounter)).toBe(10);
  });

  it('a result that aliases the draft cannot poison the cache', async () => {
    const errs = await store.mutate((d) => {
      d.errors = [{ at: 0, message: '1' }];
      return { changed: true, result: d.errors };
    });
    errs[0]!.message = 'tampered';
    expect(counterOf(await store.read())).toBe(1);
  });

  it('can be switched off', async () => {
    const slow = new FileStore(dir, { fastPath: false });
    await slow.mutate(incrementCounter);
    const parses = storeStats.parses;
    await slow.mutate(incrementCounter);
    expect(storeStats.parses).toBe(parses + 1);
  });
});

describe('fail-closed load', () => {
  const stateFile = () => join(dir, '.opencomms', 'state.json');
  const put = async (text: string) => {
    await mkdir(join(dir, '.opencomms'), { recursive: true });
    await writeFile(stateFile(), text);
  };

  it('schema_version 3 → state_incompatible on read and mutate; bytes unchanged; no backup', async () => {
    const text = JSON.stringify({ schema_version: 3, channels: 'whatever', future: true });
    await put(text);
    const before = await readFile(stateFile());
    expect(await reasonOf(store.read())).toBe('state_incompatible');
    expect(await reasonOf(store.mutate(incrementCounter))).toBe('state_incompatible');
    expect(await readFile(stateFile())).toEqual(before);
    expect((await entriesOf(join(dir, '.opencomms'))).sort()).toEqual(['state.json']);
  });

  it('a directory where state.json should be → state_unreadable, untouched', async () => {
    await mkdir(stateFile(), { recursive: true });
    expect(await reasonOf(store.read())).toBe('state_unreadable');
    expect(await reasonOf(store.mutate(incrementCounter))).toBe('state_unreadable');
    expect((await stat(stateFile())).isDirectory()).toBe(true);
    expect((await readdir(join(dir, '.opencomms'))).filter((f) => f.startsWith('state.'))).toEqual(['state.json']);
  });

  const memberRow = (over: Record<string, unknown>) => ({ ...member('sess_a', 'Reviewer'), ...over });
  const v2With = (m: Record<string, unknown>) =>
    JSON.stringify({
      schema_version: 2,
      channels: { a: channel('a', [m]) },
      messages: {},
      queues: {},
      delivered_to: {},
      errors: [],
    });
  const corrupt: [string, string, RegExp][] = [
    ['garbage text', 'this is {not json', /not valid JSON/],
    ['a root array', '[1,2,3]', /root is not an object/],
    ['no schema_version', JSON.stringify({ channels: {} }), /schema_version missing/],
    ['a member with a bad role', v2With(memberRow({ role: '1 bad role!' })), /role/],
    ['a member without session_id', v2With(memberRow({ session_id: undefined })), /session_id/],
  ];
  for (const [label, text, cause] of corrupt)
    for (const via of ['read', 'mutate'] as const)
      it(`${label} (${via}) → backup with the original bytes, fresh state, one state_corrupt error`, async () => {
        await put(text);
        if (via !== 'read') await store.mutate(() => ({ changed: false, result: 0 }));
        const s = await store.read();
        const backups = (await readdir(join(dir, '.opencomms'))).filter((f) => /^state\.corrupt\.\d+\.json$/.test(f));
        expect(backups).toHaveLength(1);
        expect(await readFile(join(dir, '.opencomms', backups[0]!), 'utf8')).toBe(text);
        const corruptErrors = s.errors.filter((e) => e.reason === 'state_corrupt');
        expect(corruptErrors).toHaveLength(1);
        expect(corruptErrors[0]!.message).toContain(backups[0]);
        expect(corruptErrors[0]!.message).toMatch(cause);
        expect(s.channels).toEqual({});
        // Durable: a fresh process sees the recovered state, not the corrupt one.
        const other = new FileStore(dir);
        expect((await other.read()).errors.filter((e) => e.reason === 'state_corrupt')).toHaveLength(1);
        other.close();
      });
});
