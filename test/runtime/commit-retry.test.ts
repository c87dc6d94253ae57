// A batch the host accepted whose commit the store refused (its server restarting, say) stays in
// flight, held by this live process: nobody else may take it, so unless this process commits it
// later the member's mail stops for good. The commit is asked again every DELIVERY_RETRY_MS until
// the store takes it; the requeue of a failed hand-over likewise.
import { afterEach, expect, it, vi } from 'vitest';
import type { Caller } from '../../src/engine/index.ts';
import { DELIVERY_RETRY_MS } from '../../src/protocol/limits.ts';
import { RefusalError, refuse } from '../../src/protocol/result.ts';
import type { State } from '../../src/protocol/schema.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { MemoryStore } from '../../src/store/index.ts';
import type { MutateOutcome } from '../../src/store/types.ts';

const caller = (session_id: string, delivery_mode: 'push' | 'pull'): Caller => ({
  session_id,
  host: 'test',
  surface: 'mcp',
  delivery_mode,
  host_session_id: null,
  project_id: 'local-project',
  worktree: '/w',
});

/** A memory store that refuses the next `failing` mutations, as an unreachable server does. */
class Flaky extends MemoryStore {
  failing = 0;
  refused = 0;
  override mutate<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    if (this.failing > 0) {
      this.failing--;
      this.refused++;
      return Promise.reject(new RefusalError(refuse('state_unreadable', 'the server is restarting')));
    }
    return super.mutate(fn);
  }
}

const opened: Runtime[] = [];
afterEach(async () => {
  for (const rt of opened.splice(0)) await rt.close();
});

async function pushPair(deliver: (text: string) => Promise<void>) {
  const store = new Flaky();
  const rt = new Runtime(store, {
    log: () => {},
    driver: { method: 'push', owns: (rid) => rid === 'b', deliver: (_rid, text) => deliver(text) },
  });
  opened.push(rt);
  await rt.start();
  await rt.run({ op: 'create', caller: caller('a', 'pull'), args: { channel: 'c', role: 'A', role_prompt: 'send' } });
  await rt.run({ op: 'join', caller: caller('b', 'push'), args: { channel: 'c', role: 'B', role_prompt: 'read' } });
  return { store, rt };
}

/** The delivery status of every live envelope (a delivered one leaves the live state for history). */
const statuses = async (store: MemoryStore) =>
  Object.values((await store.read()).messages).map((m) => m.delivery_status);

it('a commit the store refused after the host took the batch is asked again until it holds', async () => {
  const seen: string[] = [];
  let store!: Flaky;
  ({ store } = await pushPair(async (text) => {
    seen.push(text);
    if (seen.length === 1) store.failing = 2; // the commit, and its first retry
  }));
  const rt = opened[0]!;
  expect((await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'one' } })).ok).toBe(true);
  await vi.waitFor(() => expect(store.refused).toBe(1), { timeout: 2_000, interval: 10 });
  expect(await statuses(store)).toEqual(['in_flight']);
  await vi.waitFor(async () => expect(await statuses(store)).toEqual([]), {
    timeout: 3 * DELIVERY_RETRY_MS + 1_000,
    interval: 50,
  });
  expect(store.refused).toBe(2);
  // The member's mail flows on.
  expect((await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'two' } })).ok).toBe(true);
  await vi.waitFor(() => expect(seen).toHaveLength(2), { timeout: 2_000, interval: 50 });
  await vi.waitFor(async () => expect(await statuses(store)).toEqual([]), { timeout: 2_000, interval: 50 });
  expect(seen[1]).toContain('two');
}, 15_000);

it('a requeue the store refused after a failed hand-over is asked again, and the batch is delivered later', async () => {
  let store!: Flaky;
  let tries = 0;
  ({ store } = await pushPair(async () => {
    tries++;
    if (tries === 1) {
      store.failing = 1; // the requeue
      throw new Error('the host is busy');
    }
  }));
  const rt = opened[0]!;
  expect((await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'one' } })).ok).toBe(true);
  await vi.waitFor(() => expect(tries).toBe(2), { timeout: 3 * DELIVERY_RETRY_MS + 1_000, interval: 50 });
  await vi.waitFor(async () => expect(await statuses(store)).toEqual([]), { timeout: 2_000, interval: 50 });
  expect(store.refused).toBe(1);
}, 15_000);
