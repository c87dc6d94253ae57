import { appendFile, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Envelope, State } from '../../src/protocol/schema.ts';
import { EnvelopeSchema } from '../../src/protocol/schema.ts';
import { appendHistory, deleteHistory, readHistory } from '../../src/store/history-log.ts';
import type { StorePaths } from '../../src/store/paths.ts';
import { FileStore } from '../../src/store/store.ts';
import { useTempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let paths: StorePaths;
useTempProject((p) => ({ dir, paths } = p));

const env = (id: string, channel_id: string, content = id): Envelope =>
  EnvelopeSchema.parse({ message_id: id, channel_id, timestamp: 1, content, delivery_status: 'delivered' });
const ids = (es: Envelope[]) => es.map((e) => e.message_id);

describe('history log', () => {
  it('appends per channel and reads newest first, last line of an id winning', async () => {
    await appendHistory(paths, [env('m1', 'chn_a'), env('m2', 'chn_a'), env('x1', 'chn_b')]);
    await appendHistory(paths, [env('m3', 'chn_a'), env('m2', 'chn_a', 'again')]); // crash-retry duplicate
    expect((await readdir(paths.history)).sort()).toEqual(['chn_a.jsonl', 'chn_b.jsonl']);
    const all = await readHistory(paths, 'chn_a', { limit: 10 });
    expect(ids(all)).toEqual(['m2', 'm3', 'm1']);
    expect(all[0]!.content).toBe('again');
    expect(ids(await readHistory(paths, 'chn_a', { limit: 2 }))).toEqual(['m2', 'm3']);
    expect(ids(await readHistory(paths, 'chn_b', { limit: 10 }))).toEqual(['x1']);
    expect(await readHistory(paths, 'chn_none', { limit: 10 })).toEqual([]);
  });

  it('reads across chunk boundaries and tolerates a torn last line', async () => {
    const big = Array.from({ length: 300 }, (_, i) => env(`m${i}`, 'chn_a', 'x'.repeat(1000 + i)));
    await appendHistory(paths, big);
    await appendFile(join(paths.history, 'chn_a.jsonl'), '{"message_id":"torn","chan'); // crash mid-append
    expect(ids(await readHistory(paths, 'chn_a', { limit: 3 }))).toEqual(['m299', 'm298', 'm297']);
    const all = await readHistory(paths, 'chn_a', { limit: 1000 });
    expect(all).toHaveLength(300);
    expect(all[299]!.content).toBe('x'.repeat(1000));
    await appendHistory(paths, [env('after', 'chn_a')]); // must not be glued to the torn line
    expect(ids(await readHistory(paths, 'chn_a', { limit: 2 }))).toEqual(['after', 'm299']);
  });

  it('refuses a bad channel id before building a path', async () => {
    expect(() => appendHistory(paths, [env('m1', 'chn_a'), env('m2', '../evil')])).toThrow(/invalid channel id/);
    await expect(readHistory(paths, 'chn_../x', { limit: 1 })).rejects.toThrow(/invalid channel id/);
    await expect(deleteHistory(paths, '../../etc')).rejects.toThrow(/invalid channel id/);
    expect(await readdir(dir)).toEqual([]); // nothing written, not even the good envelope
  });

  it('deleteHistory removes the log', async () => {
    await appendHistory(paths, [env('m1', 'chn_a')]);
    await deleteHistory(paths, 'chn_a');
    await deleteHistory(paths, 'chn_a');
    expect(await readHistory(paths, 'chn_a', { limit: 5 })).toEqual([]);
  });

  it('mutate appends outgoing history before saving', async () => {
    const store = new FileStore(dir);
    await store.mutate((d: State) => ({ changed: true, result: null, history: [env('m1', 'chn_a')] }));
    expect(await readFile(join(paths.history, 'chn_a.jsonl'), 'utf8')).toContain('"message_id":"m1"');
    // A history entry with a bad id fails the mutation before anything is saved.
    await expect(
      store.mutate((d) => {
        d.errors.push({ at: 1, message: 'x' });
        return { changed: true, result: null, history: [env('m2', 'nope')] };
      }),
    ).rejects.toThrow(/invalid channel id/);
    expect((await store.read()).errors).toEqual([]);
    store.close();
  });
});
