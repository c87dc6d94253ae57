// A runtime that catches up while idle (the MCP server's, RuntimeOptions.catchUpWhileIdle) applies what other processes
// write while it waits for its next call, and not while a call runs; one that does not applies it at its next call.
import { afterEach, expect, it, vi } from 'vitest';
import type { Caller } from '../../src/engine/index.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { CATCH_UP_IDLE_MS } from '../../src/runtime/limits.ts';
import { useProject } from '../helpers/project.ts';

const project = useProject('oc-catch-up-');
const opened: Runtime[] = [];
afterEach(async () => {
  for (const rt of opened.splice(0)) await rt.close();
});

const caller = (session_id: string): Caller => ({
  session_id,
  host: 'test',
  surface: 'mcp',
  delivery_mode: 'pull',
  host_session_id: null,
  project_id: 'local-project',
  worktree: project.dir,
});

/** A writer and a reader on one project; after the reader's last call the writer sends. Returns
 *  the reader, its live state (changed in place by its catch-ups) and the new message's id. */
async function sendWhileReaderWaits(catchUpWhileIdle: boolean) {
  const writer = openRuntime(project.dir, { log: () => {} });
  const reader = openRuntime(project.dir, { log: () => {}, catchUpWhileIdle });
  opened.push(writer, reader);
  await writer.run({ op: 'create', caller: caller('a'), args: { channel: 'c', role: 'A', role_prompt: 'send' } });
  await reader.start();
  expect(
    (await reader.run({ op: 'join', caller: caller('r'), args: { channel: 'c', role: 'R', role_prompt: 'read' } })).ok,
  ).toBe(true);
  const live = await reader.store.peek();
  const sent = await writer.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'hello' } });
  expect(sent.ok).toBe(true);
  const id = (sent.data as { message_ids: string[] }).message_ids[0]!;
  return { reader, live, id };
}

it("a runtime catching up while idle applies another process's send before its next call", async () => {
  const { live, id } = await sendWhileReaderWaits(true);
  await vi.waitFor(() => expect(live.messages[id]?.content).toBe('hello'), { timeout: 2_000, interval: 10 });
});

it('a runtime that does not catch up while idle applies it at its next call, not before', async () => {
  const { reader, live, id } = await sendWhileReaderWaits(false);
  await new Promise((r) => setTimeout(r, 6 * CATCH_UP_IDLE_MS)); // six catch-ups of one that did
  expect(live.messages[id]).toBeUndefined();
  await reader.store.peek();
  expect(live.messages[id]?.content).toBe('hello');
});

it('a runtime catching up while idle does not while a call runs, and does again once it ends', async () => {
  const rt = openRuntime(project.dir, { log: () => {}, catchUpWhileIdle: true });
  opened.push(rt);
  await rt.run({ op: 'create', caller: caller('a'), args: { channel: 'c', role: 'A', role_prompt: 'send' } });
  await rt.run({ op: 'join', caller: caller('r'), args: { channel: 'c', role: 'R', role_prompt: 'read' } });
  const catchUp = vi.spyOn(rt.store, 'catchUp');
  // A call that lasts six catch-up periods: its mutation waits before it runs, counting the
  // catch-ups meanwhile.
  const mutate = rt.store.mutate.bind(rt.store);
  let during = -1;
  vi.spyOn(rt.store, 'mutate').mockImplementation(async (fn) => {
    const before = catchUp.mock.calls.length;
    await new Promise((r) => setTimeout(r, 6 * CATCH_UP_IDLE_MS));
    during = catchUp.mock.calls.length - before;
    return mutate(fn);
  });
  const sent = await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'slow' } });
  expect(sent.ok).toBe(true);
  expect(during).toBe(0);
  catchUp.mockClear();
  await vi.waitFor(() => expect(catchUp).toHaveBeenCalled(), { timeout: 1_000, interval: 5 });
});

it('after a call, a catch-up that found nothing waits twice as long as the last; one that applied something comes back soon', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  try {
    const rt = openRuntime(project.dir, { log: () => {}, catchUpWhileIdle: true });
    opened.push(rt);
    let news = false;
    const at: number[] = [];
    const t0 = Date.now();
    vi.spyOn(rt.store, 'catchUp').mockImplementation(async () => {
      at.push(Date.now() - t0);
      return news;
    });
    await rt.run({ op: 'status', sid: 'nobody', args: {} });
    const t1 = Date.now() - t0;
    await vi.advanceTimersByTimeAsync(700);
    // A quiet project: 10, 20, 40, 80, 160, 320 ms apart, not every 10 ms.
    expect(at.map((x) => x - t1)).toEqual([10, 30, 70, 150, 310, 630].map((x) => x * (CATCH_UP_IDLE_MS / 10)));
    // Busy writers: after the next call, each catch-up applies something and the next comes
    // CATCH_UP_IDLE_MS later.
    news = true;
    await rt.run({ op: 'status', sid: 'nobody', args: {} });
    at.length = 0;
    await vi.advanceTimersByTimeAsync(CATCH_UP_IDLE_MS * 20);
    const gaps = at.slice(1).map((x, i) => x - at[i]!);
    expect(gaps.length).toBeGreaterThan(10);
    expect(new Set(gaps)).toEqual(new Set([CATCH_UP_IDLE_MS]));
  } finally {
    vi.useRealTimers();
  }
});
