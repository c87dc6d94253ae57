// The journal write path (FEATURES.md §2.7, §2.10 as departed from in the README): one line per
// mutation, whole lines only, damage preserved and recovered, compaction, catch-up across stores.
import { linkSync, unlinkSync, writeFileSync } from 'node:fs';
import { appendFile, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeStats } from '../../src/store/file/state-file.ts';
import { FileStore } from '../../src/store/file/store.ts';
import { counterOf, incrementCounter, tempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let cleanup: () => Promise<void>;
const opened: FileStore[] = [];
const open = (options?: ConstructorParameters<typeof FileStore>[1]) => {
  const s = new FileStore(dir, options);
  opened.push(s);
  return s;
};
beforeEach(async () => {
  ({ dir, cleanup } = await tempProject());
});
afterEach(async () => {
  for (const s of opened.splice(0)) s.close();
  await cleanup();
});

const stateFile = () => join(dir, '.opencomms', 'state.json');
const journalId = async () => (JSON.parse(await readFile(stateFile(), 'utf8')) as { journal_id?: string }).journal_id;
const journalDir = () => join(dir, '.opencomms', 'journal');
/** The current journal's text ('' before its first line: the first mutation writes the snapshot). */
const journalText = async () => readFile(join(journalDir(), `${await journalId()}.jsonl`), 'utf8').catch(() => '');
/** A mutation under the lock that changes nothing (the counter lives in `errors`, which recovery appends to). */
const nothing = () => ({ changed: false, result: null });
/** A fresh store's view: what any other process would load now. */
const loadFresh = async () => {
  const s = open();
  const state = await s.read();
  s.close();
  return state;
};

describe('a mutation is one journal line', () => {
  it('appends {"n","ops"} and leaves state.json untouched', async () => {
    const store = open();
    await store.mutate(incrementCounter); // the first mutation writes the snapshot
    const snapshot = await readFile(stateFile(), 'utf8');
    const before = await journalText();
    for (let i = 0; i < 3; i++) await store.mutate(incrementCounter);
    expect(await readFile(stateFile(), 'utf8')).toBe(snapshot);
    const lines = (await journalText())
      .slice(before.length)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    expect(lines.map((l) => l.n)).toEqual([lines[0].n, lines[0].n + 1, lines[0].n + 2]);
    expect(lines[2].ops).toEqual([['s', ['errors'], [{ at: 0, message: '4' }]]]);
    expect(counterOf(await loadFresh())).toBe(4);
  });

  it('a refused or unchanged mutation appends nothing', async () => {
    const store = open();
    await store.mutate(incrementCounter);
    const before = await journalText();
    await store.mutate((d) => {
      d.errors = [];
      return { changed: false, result: null };
    });
    await expect(
      store.mutate((d) => {
        d.errors = [];
        throw new Error('engine bug');
      }),
    ).rejects.toThrow('engine bug');
    expect(await journalText()).toBe(before);
    expect(counterOf(await store.read())).toBe(1); // rolled back in memory too
  });
});

describe('whole lines only', () => {
  it('a torn tail is never applied, and the next writer starts a fresh line after it', async () => {
    const a = open();
    await a.mutate(incrementCounter);
    await a.mutate(incrementCounter);
    const file = join(journalDir(), `${await journalId()}.jsonl`);
    const n = (await journalText()).trim().split('\n').length;
    // A write cut by power loss: part of the line that would have set the counter to 99.
    await appendFile(file, `{"n":${n + 1},"ops":[["s",["errors"],[{"at":0,"message":"99"`);
    expect(counterOf(await loadFresh())).toBe(2);

    const b = open();
    expect(await b.mutate(incrementCounter)).toBe(3);
    const text = await readFile(file, 'utf8');
    expect(text).toMatch(/"message":"99"#\n\{"n":/); // the torn bytes kept, a fresh line after them
    expect(counterOf(await loadFresh())).toBe(3);
    expect((await loadFresh()).errors.some((e) => e.reason === 'state_corrupt')).toBe(false);
  });

  it('a line out of sequence is damage: the journal is preserved, the state before it kept, one state_corrupt error', async () => {
    const a = open();
    await a.mutate(incrementCounter);
    await a.mutate(incrementCounter);
    const id = await journalId();
    await appendFile(
      join(journalDir(), `${id}.jsonl`),
      `${JSON.stringify({ n: 999, ops: [['s', ['errors'], []]] })}\n`,
    );

    const b = open();
    await b.mutate(nothing); // recovery happens under the lock
    const files = await readdir(journalDir());
    expect(files.filter((f) => f.startsWith(`${id}.corrupt.`))).toHaveLength(1);
    expect(await journalId()).not.toBe(id); // a new snapshot names a new journal
    const state = await loadFresh();
    expect(state.errors.filter((e) => e.reason === 'state_corrupt')).toHaveLength(1);
    expect(state.errors.find((e) => e.reason === 'state_corrupt')!.message).toMatch(
      /out of sequence.*journal\/.*\.corrupt\./,
    );
    expect(counterOf(state)).toBe(2); // the state before the damage
  });

  it('a whole line that would make the state invalid is damage too, never applied', async () => {
    const a = open();
    await a.mutate(incrementCounter);
    await a.mutate(incrementCounter);
    const id = await journalId();
    const n = (await journalText()).trim().split('\n').filter(Boolean).length;
    await appendFile(
      join(journalDir(), `${id}.jsonl`),
      `${JSON.stringify({ n: n + 1, ops: [['s', ['channels', 'x'], { name: 'x' }]] })}\n`,
    );
    const b = open();
    await b.mutate(nothing);
    const state = await loadFresh();
    expect(state.channels).toEqual({});
    expect(counterOf(state)).toBe(2);
    expect(state.errors.some((e) => e.reason === 'state_corrupt')).toBe(true);
  });
});

/** Mutations by `store` until state.json names a new journal (one compaction); returns both ids. */
async function untilCompacted(store: FileStore) {
  const before = await journalId();
  for (let i = 0; i < 50 && (await journalId()) === before; i++) await store.mutate(incrementCounter);
  const after = await journalId();
  expect(after).not.toBe(before);
  return { before: before!, after: after! };
}

/** A reader that read the state, then a writer's mutations up to one compaction it has not seen:
 *  `before` is the journal that compaction sealed. */
async function readerBeforeCompaction() {
  const writer = open({ compactBytes: 300 });
  const reader = open();
  await writer.mutate(incrementCounter);
  await reader.read();
  const { before } = await untilCompacted(writer);
  return { reader, before };
}

/** A reader behind a compaction whose seal is not written yet; `seal()` appends it. */
async function readerBeforeSeal() {
  const { reader, before } = await readerBeforeCompaction();
  const file = join(journalDir(), `${before}.jsonl`);
  const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
  await writeFile(file, `${lines.slice(0, -1).join('\n')}\n`);
  return { reader, seal: () => appendFile(file, `${lines.at(-1)}\n`) };
}

/** Rewrites the last line (the seal) of journal `id`, as a hand or a bug might. */
async function editSeal(id: string, edit: (seal: { ops: unknown[]; sealed: { journal: string } }) => void) {
  const file = join(journalDir(), `${id}.jsonl`);
  const lines = (await readFile(file, 'utf8')).trim().split('\n');
  const seal = JSON.parse(lines.pop()!);
  edit(seal);
  await writeFile(file, `${[...lines, JSON.stringify(seal)].join('\n')}\n`);
}

const linesOf = async (id: string) =>
  (await readFile(join(journalDir(), `${id}.jsonl`), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('compaction', () => {
  it('past compactBytes the next mutation writes a new snapshot and journal; the journal it ended is sealed and kept until the next one', async () => {
    const store = open({ compactBytes: 300 });
    await store.mutate(incrementCounter);
    const first = await untilCompacted(store);
    const sealed = (await linesOf(first.before)).at(-1);
    expect(sealed.ops.length).toBeGreaterThan(0); // the mutation the snapshot was written for
    expect(sealed.sealed.journal).toBe(first.after);
    const second = await untilCompacted(store);
    expect(second.before).toBe(first.after);
    // The new journal has no line yet (the compacting mutation's ops are in the seal; it was
    // created empty before the snapshot that names it); the one before the sealed one is gone.
    expect((await readdir(journalDir())).sort()).toEqual([`${second.before}.jsonl`, `${second.after}.jsonl`].sort());
    expect(await readFile(join(journalDir(), `${second.after}.jsonl`), 'utf8')).toBe('');
    expect(counterOf(await loadFresh())).toBe(counterOf(await store.read()));
  });

  it('a store holding the old journal catches up from the new snapshot', async () => {
    const writer = open({ compactBytes: 300 });
    const reader = open();
    await writer.mutate(incrementCounter);
    expect(counterOf(await reader.read())).toBe(1);
    for (let i = 0; i < 10; i++) await writer.mutate(incrementCounter);
    expect(counterOf(await reader.read())).toBe(11);
    expect(await reader.mutate(incrementCounter)).toBe(12);
    expect(counterOf(await writer.read())).toBe(12);
  });
});

describe('following a compaction by its seal', () => {
  it('a store up to date adopts the new snapshot without reading it, and goes on from its journal', async () => {
    const writer = open({ compactBytes: 300 });
    const reader = open();
    await writer.mutate(incrementCounter);
    expect(counterOf(await reader.read())).toBe(1);
    const before = await journalId();
    const parses = storeStats.parses;
    const followed = storeStats.sealsFollowed;
    while ((await journalId()) === before) {
      await writer.mutate(incrementCounter);
      await reader.read(); // up to date after every line, as a busy peer is
    }
    expect(storeStats.sealsFollowed).toBe(followed + 1);
    expect(storeStats.parses).toBe(parses);
    expect(await reader.read()).toEqual(await loadFresh());
    const n = await reader.mutate(incrementCounter); // written to the new journal
    expect(counterOf(await loadFresh())).toBe(n);
    expect(counterOf(await writer.read())).toBe(n);
  });

  it('a store behind replays the lines before the seal, then follows it', async () => {
    const writer = open({ compactBytes: 300 });
    const reader = open();
    await writer.mutate(incrementCounter);
    expect(counterOf(await reader.read())).toBe(1);
    const parses = storeStats.parses;
    await untilCompacted(writer);
    expect(await reader.read()).toEqual(await loadFresh());
    expect(storeStats.parses).toBe(parses + 1); // loadFresh's own parse, none by the reader
  });

  it('catchUp() leaves a snapshot replaced with no seal while the lock is held, and follows the seal once written', async () => {
    const { reader, seal } = await readerBeforeSeal();
    const parses = storeStats.parses;
    const followed = storeStats.sealsFollowed;
    const release = holdLockElsewhere(); // the compacting writer, between its rename and its seal
    await reader.catchUp();
    expect([storeStats.parses, storeStats.sealsFollowed]).toEqual([parses, followed]);
    await seal();
    await reader.catchUp();
    expect([storeStats.parses, storeStats.sealsFollowed]).toEqual([parses, followed + 1]);
    release();
    expect(await reader.read()).toEqual(await loadFresh());
    expect(storeStats.parses).toBe(parses + 1); // loadFresh's own parse, none by the reader
  });

  it('catchUp() two compactions behind loads, even while the lock is held: no seal it holds can lead it', async () => {
    const writer = open({ compactBytes: 300 });
    const reader = open();
    await writer.mutate(incrementCounter);
    await reader.read();
    await untilCompacted(writer);
    await untilCompacted(writer);
    const parses = storeStats.parses;
    const release = holdLockElsewhere();
    try {
      await reader.catchUp();
      expect(storeStats.parses).toBe(parses + 1);
    } finally {
      release();
    }
    expect(await reader.read()).toEqual(await loadFresh());
  });

  it('catchUp() reads a replaced snapshot whole when nobody holds the lock (a compaction that never sealed)', async () => {
    const { reader } = await readerBeforeSeal();
    const parses = storeStats.parses;
    await reader.catchUp();
    expect(storeStats.parses).toBe(parses + 1);
    expect(await reader.read()).toEqual(await loadFresh());
  });

  it('a read between the rename and the seal reads the new snapshot whole, whoever holds the lock', async () => {
    const { reader } = await readerBeforeSeal();
    const parses = storeStats.parses;
    const release = holdLockElsewhere();
    try {
      expect(await reader.read()).toEqual(await loadFresh());
      expect(storeStats.parses).toBe(parses + 2); // the reader's load and loadFresh's
    } finally {
      release();
    }
  });

  it('a seal that does not name the file in place is not followed: the snapshot is read whole', async () => {
    const { reader } = await readerBeforeCompaction();
    // Edited in place after the compaction (same inode, another size): what the seal promised is gone.
    const text = await readFile(stateFile(), 'utf8');
    const edited = JSON.parse(text);
    edited.errors.push({ at: 1, reason: 'state_corrupt', message: 'edited by hand' });
    await writeFile(stateFile(), JSON.stringify(edited, null, 2));
    const parses = storeStats.parses;
    const state = await reader.read();
    expect(storeStats.parses).toBe(parses + 1);
    expect(state.errors.some((e) => e.message === 'edited by hand')).toBe(true);
  });

  it('a malformed seal is ignored: the snapshot is read whole', async () => {
    const { reader, before } = await readerBeforeCompaction();
    await editSeal(before, (seal) => (seal.sealed.journal = '../../state'));
    const parses = storeStats.parses;
    expect(await reader.read()).toEqual(await loadFresh());
    expect(storeStats.parses).toBe(parses + 2); // the reader's load and loadFresh's
  });

  it('a seal whose ops would make the state invalid is not followed: the snapshot is read whole, nothing recorded as damage', async () => {
    const { reader, before } = await readerBeforeCompaction();
    await editSeal(before, (seal) => (seal.ops = [['s', ['channels', 'x'], { name: 'x' }]]));
    const fresh = await loadFresh();
    const state = await reader.read();
    expect(state).toEqual(fresh);
    expect(state.channels).toEqual({});
    expect(state.errors.some((e) => e.reason === 'state_corrupt')).toBe(false);
  });
});

describe('catch-up across stores', () => {
  it("another store's lines are applied without re-parsing state.json", async () => {
    const a = open();
    const b = open();
    await a.mutate(incrementCounter);
    expect(counterOf(await b.read())).toBe(1);
    const parses = storeStats.parses;
    for (let i = 0; i < 5; i++) await a.mutate(incrementCounter);
    expect(counterOf(await b.read())).toBe(6);
    expect(await b.mutate(incrementCounter)).toBe(7);
    expect(storeStats.parses).toBe(parses);
    expect(counterOf(await a.read())).toBe(7);
  });

  it('a writer that finds the lock held applies the lines appended meanwhile before it takes the lock', async () => {
    const a = open();
    const b = open();
    await a.mutate(incrementCounter);
    await b.read();
    for (let i = 0; i < 3; i++) await a.mutate(incrementCounter);
    const applied = storeStats.linesApplied;
    const release = holdLockElsewhere();
    const write = b.mutate(incrementCounter);
    await until(() => storeStats.linesApplied === applied + 3);
    release();
    expect(await write).toBe(5);
    expect(storeStats.linesApplied).toBe(applied + 3); // nothing left to apply under the lock
    expect(counterOf(await loadFresh())).toBe(5);
  });

  it('a writer waiting for the lock never loads a snapshot: a compaction without its seal yet is left, its seal followed once written', async () => {
    const { reader, seal } = await readerBeforeSeal();
    const parses = storeStats.parses;
    const followed = storeStats.sealsFollowed;
    const release = holdLockElsewhere();
    const write = reader.mutate(incrementCounter);
    await new Promise((r) => setTimeout(r, 150)); // several wake-ups of the waiter
    expect([storeStats.parses, storeStats.sealsFollowed]).toEqual([parses, followed]);
    await seal();
    await until(() => storeStats.sealsFollowed === followed + 1);
    release();
    const n = await write;
    expect([storeStats.parses, storeStats.sealsFollowed]).toEqual([parses, followed + 1]);
    expect(counterOf(await loadFresh())).toBe(n);
  });
});

/** Takes the state lock as another process would (its own file linked as the lock); returns
 *  the release. */
function holdLockElsewhere() {
  const foreign = join(dir, '.opencomms', '.held-elsewhere');
  const lock = join(dir, '.opencomms', '.state.lock');
  writeFileSync(foreign, '');
  linkSync(foreign, lock);
  return () => unlinkSync(lock);
}

async function until(cond: () => boolean, ms = 2000) {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('durability levels', () => {
  it('durable and default write the same lines (the level changes only fsync)', async () => {
    const plain = open();
    await plain.mutate(incrementCounter);
    await plain.mutate(incrementCounter);
    const durable = open({ durability: 'durable' });
    expect(durable.durability).toBe('durable');
    expect(await durable.mutate(incrementCounter)).toBe(3);
    expect(counterOf(await loadFresh())).toBe(3);
    expect(
      (await journalText())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).n),
    ).toEqual(
      (await journalText())
        .trim()
        .split('\n')
        .map((_, i, all) => JSON.parse(all[0]!).n + i),
    );
  });
});
