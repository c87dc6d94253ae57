// Store.subscribe: a subscription started on a fresh project sees state.json appear; it is told when an
// archive was written or removed (the console refreshes on archive-only changes, CON-5), by the
// file store and by the memory store alike.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ArchiveSchema, FileStore, MemoryStore, type StoreChange } from '../../src/store/index.ts';
import { Arrivals } from '../helpers/arrivals.ts';
import { incrementCounter, useTempProject } from '../helpers/store-fixtures.ts';

let dir: string;
useTempProject((p) => void (dir = p.dir));

/** Collects calls; `next(pred)` resolves at the first matching call (seen or to come). */
function recorder() {
  const calls = new Arrivals<StoreChange>('subscriber call');
  return {
    calls: calls.items,
    onChange: async (c: StoreChange) => calls.push(c),
    next: (pred: (c: StoreChange) => boolean, from = 0) => calls.next(pred, 3000, from),
  };
}

describe('FileStore.subscribe', () => {
  it('sees the first state.json of a fresh project, and reports archive files written or removed', async () => {
    const store = new FileStore(dir);
    const r = recorder();
    const w = await store.subscribe(r.onChange, () => {});
    try {
      await new FileStore(dir).mutate(incrementCounter);
      await r.next(() => true);
      const archives = join(dir, '.opencomms', 'archives');
      await mkdir(archives, { recursive: true });
      const file = join(archives, 'chn_abc.json');
      let n = r.calls.length;
      await writeFile(file, '{}');
      await r.next((c) => c.archives, n);
      n = r.calls.length;
      await rm(file);
      await r.next((c) => c.archives, n);
      // A temp file of an atomic write is not an archive.
      n = r.calls.length;
      await writeFile(join(archives, '.arch.1.0badc0de.tmp'), 'x');
      await new FileStore(dir).mutate(incrementCounter);
      await r.next(() => true, n);
      expect(r.calls.slice(n).some((c) => c.archives)).toBe(false);
    } finally {
      await w.close();
    }
  });
});

describe('MemoryStore.subscribe', () => {
  it('tells subscribers whether a mutation wrote or removed an archive', async () => {
    const store = new MemoryStore();
    const r = recorder();
    await store.subscribe(r.onChange);
    await store.mutate(incrementCounter);
    const archive = ArchiveSchema.parse({
      schema: 1,
      channel_id: 'chn_x',
      name: 'x',
      summary: '',
      members: [],
      created_at: 0,
      saved_at: 1,
      saved_by: null,
      saved_by_role: null,
      message_count: 0,
      messages: [],
      final_state_note: '',
    });
    await store.mutate(() => ({ changed: true, result: null, archive }));
    await store.mutate(() => ({ changed: true, result: null, deleteArchive: 'chn_x' }));
    await r.next(() => r.calls.length === 3);
    expect(r.calls).toEqual([{ archives: false }, { archives: true }, { archives: true }]);
  });
});
