import { appendFile, readFile, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Envelope } from '../../src/protocol/schema.ts';
import { EnvelopeSchema } from '../../src/protocol/schema.ts';
import { appendHistory, deleteHistory, MAX_OPEN_LOGS, readHistory } from '../../src/store/file/history-log.ts';
import type { StorePaths } from '../../src/store/paths.ts';
import { FileStore } from '../../src/store/file/store.ts';
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

  it('a log replaced since this process appended (same size, torn end) is looked at again', async () => {
    await appendHistory(paths, [env('m1', 'chn_a')]);
    const file = join(paths.history, 'chn_a.jsonl');
    const size = (await readFile(file)).length;
    await rm(file);
    await writeFile(file, `{"message_id":"torn","channel_id":"chn_a"`.padEnd(size, ' ')); // no newline
    await appendHistory(paths, [env('after', 'chn_a')]);
    expect(ids(await readHistory(paths, 'chn_a', { limit: 5 }))).toEqual(['after']);
  });

  it('makes the history directory again when it was removed under a running process', async () => {
    await appendHistory(paths, [env('m1', 'chn_a')]);
    await rm(paths.history, { recursive: true });
    await appendHistory(paths, [env('m2', 'chn_a')]);
    expect(ids(await readHistory(paths, 'chn_a', { limit: 5 }))).toEqual(['m2']);
  });

  it('keeps a bounded number of logs open, and none of a closed store', async () => {
    const openHere = async () => {
      const fds = await readdir('/proc/self/fd');
      const targets = await Promise.all(fds.map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
      return targets.filter((t) => t.startsWith(paths.history)).length;
    };
    for (let i = 0; i < 40; i++) await appendHistory(paths, [env(`m${i}`, `chn_${i}`)]);
    expect(await openHere()).toBe(MAX_OPEN_LOGS);
    await new FileStore(dir).close();
    expect(await openHere()).toBe(0);
    expect(ids(await readHistory(paths, 'chn_39', { limit: 5 }))).toEqual(['m39']);
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
    await store.mutate(() => ({ changed: true, result: null, history: [env('m1', 'chn_a')] }));
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
