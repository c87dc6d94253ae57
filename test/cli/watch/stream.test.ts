// The shell of `opencomms watch` under a burst: every envelope that left live state is reported,
// and each wake-up reads each history log at most twice, however many envelopes vanished from it
// (a per-envelope scan made a 3,000-envelope burst print its last line ~38 s late).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Caller } from '../../../src/engine/index.ts';
import { newCorrelationId, newMessageId } from '../../../src/protocol/ids.ts';
import type { Envelope } from '../../../src/protocol/schema.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { FileStore, type Store, type Subscription } from '../../../src/store/index.ts';
import type { WatchLine } from '../../../src/cli/watch/diff.ts';
import { streamChanges } from '../../../src/cli/watch/stream.ts';
import { Arrivals } from '../../helpers/arrivals.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-streamChanges-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

const member = (session_id: string, delivery_mode: string): Caller => ({
  session_id,
  host: 'test',
  surface: 'cli',
  delivery_mode,
  host_session_id: session_id,
  project_id: 'local-project',
  worktree: dir,
});

const T0 = Date.now();
const pending = (channel_id: string, i: number): Envelope => ({
  message_id: newMessageId(),
  channel_id,
  sender_session_id: 'sess_a',
  sender_role: 'A',
  recipient_session_id: 'sess_r',
  recipient_role: 'R',
  timestamp: T0 + i,
  message_type: 'manual',
  content: `m${i}`,
  reply_to: null,
  hop_count: 0,
  correlation_id: newCorrelationId(),
  root_message_id: null,
  delivery_status: 'pending',
  delivered_at: null,
  attempts: 0,
  delivery_method: null,
  in_flight_by: null,
  in_flight_at: null,
  transitions: [['SEND', 'pending', T0 + i]],
});

/** A FileStore that counts its history-log reads and the wake-ups it delivers. */
function counting(inner: Store) {
  const n = { logReads: 0, wakes: 0 };
  const store: Store = Object.create(inner);
  store.history = (id, limit) => {
    n.logReads++;
    return inner.history(id, limit);
  };
  store.findInHistory = (id, mid, scan) => {
    n.logReads++;
    return inner.findInHistory(id, mid, scan);
  };
  store.subscribe = (onChange, log): Promise<Subscription> =>
    inner.subscribe(async (c) => {
      n.wakes++;
      return onChange(c);
    }, log);
  return { store, n };
}

describe('watch under a burst', () => {
  it('reports every pulled envelope, reading each log at most twice per wake-up', async () => {
    const BURST = 1000;
    const rt = new Runtime(new FileStore(dir));
    const ok = async (p: Promise<{ ok: boolean; message: string; data?: any }>) => {
      const r = await p;
      if (!r.ok) throw new Error(r.message);
      return r;
    };
    await ok(
      rt.run({
        op: 'create',
        caller: member('sess_a', 'push'),
        args: { channel: 'burst', role: 'A', role_prompt: 'send', rate_limit: 1000 },
      }),
    );
    await ok(
      rt.run({
        op: 'join',
        caller: member('sess_r', 'pull'),
        args: { channel: 'burst', role: 'R', role_prompt: 'read' },
      }),
    );
    // The burst's mail queued in one mutation: sends one by one only cost the test time.
    const ids = await rt.store.mutate((d) => {
      const ch = d.channels.burst!;
      const q = (d.queues.sess_r ??= []);
      const made: string[] = [];
      for (let i = 0; i < BURST; i++) {
        const e = pending(ch.id, i);
        d.messages[e.message_id] = e;
        q.push(e.message_id);
        made.push(e.message_id);
      }
      return { changed: true, result: made };
    });

    const { store, n } = counting(new FileStore(dir));
    const delivered = new Arrivals<string>('delivered line');
    const w = await streamChanges(store, {
      log: () => {},
      onLines: (lines: WatchLine[]) => {
        for (const l of lines) if (l.kind === 'envelope' && l.to === 'delivered') delivered.push(l.message_id);
      },
    });
    try {
      const before = n.logReads;
      for (let got = 0; got < BURST; )
        got += (await ok(rt.run({ op: 'pull', sid: 'sess_r', args: { limit: 100 } }))).data.message_ids.length;
      await delivered.next(() => delivered.items.length >= BURST, 15_000);
      expect(new Set(delivered.items)).toEqual(new Set(ids));
      expect(delivered.items).toHaveLength(BURST);
      expect(n.wakes).toBeGreaterThan(0);
      expect(n.logReads - before).toBeLessThanOrEqual(2 * n.wakes);
    } finally {
      await w.close();
      await store.close();
      await rt.close();
    }
  });
});
