// Several real processes on one project: concurrent senders, a crash between drain and commit,
// and the owner-side wake (a recipient's owner delivers mail another process queued).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/engine/index.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { Envelope } from '../../src/protocol/schema.ts';
import { start, type Proc } from '../helpers/process.ts';

const worker = join(import.meta.dirname, '..', 'helpers', 'runtime-worker.ts');
let dir: string;
const children: Proc[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-mp-'));
});
afterEach(async () => {
  for (const c of children.splice(0)) await c.stop('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

const caller = (session_id: string, delivery_mode = 'push'): Caller => ({
  session_id,
  host: 'test',
  surface: 'cli',
  delivery_mode,
  host_session_id: session_id,
  project_id: 'local-project',
  worktree: dir,
});

/** A runtime worker process (test/helpers/runtime-worker.ts), killed after the test. */
function startWorker(args: string[]): Proc {
  const p = start(['--import', 'tsx', worker, ...args]);
  children.push(p);
  return p;
}

/** Live envelopes are in state.json; terminal ones have moved to the channel's history log. */
async function envelope(rt: Runtime, id: string): Promise<Envelope> {
  const state = await rt.read();
  if (state.messages[id]) return state.messages[id]!;
  const logged = await rt.store.history(state.channels.c!.id, 1000);
  const e = logged.find((x) => x.message_id === id);
  if (!e) throw new Error(`envelope ${id} is neither live nor in the history log`);
  return e;
}

const prompts = (c: Proc) =>
  c.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { rid: string; ids: string[] });

describe('runtime across processes', () => {
  it('4 processes sending concurrently to one recipient: every envelope present, FIFO per sender', async () => {
    const rt = openRuntime(dir);
    const senders = ['s1', 's2', 's3', 's4'];
    expect(
      (
        await rt.run({
          op: 'create',
          caller: caller('r', 'pull'),
          args: { channel: 'c', role: 'R', role_prompt: 'read', rate_limit: 1000 },
        })
      ).ok,
    ).toBe(true);
    for (const s of senders)
      expect(
        (
          await rt.run({
            op: 'join',
            caller: caller(s),
            args: { channel: 'c', role: s.toUpperCase(), role_prompt: 'send' },
          })
        ).ok,
      ).toBe(true);
    const barrier = join(dir, 'go');
    const kids = senders.map((s) => startWorker(['send', dir, s, 'c', '50', barrier, 'R']));
    await Promise.all(kids.map((k) => k.waitFor((l) => l === 'ready')));
    await writeFile(barrier, '');
    await Promise.all(kids.map((k) => k.waitFor((l) => l.startsWith('sent'), 30_000)));
    for (const k of kids) expect(k.lines).toContain('sent 50');
    const got: string[] = [];
    for (;;) {
      const r = await rt.run({ op: 'pull', sid: 'r', args: { limit: 100 } });
      const msgs = (r.data as { messages: Array<{ framed: string }> }).messages;
      if (!msgs.length) break;
      for (const m of msgs) got.push(/\n(s\d#\d+)\n/.exec(m.framed)![1]!);
    }
    expect(got).toHaveLength(200);
    expect(new Set(got).size).toBe(200);
    for (const s of senders) {
      const seq = got.filter((g) => g.startsWith(`${s}#`)).map((g) => Number(g.split('#')[1]));
      expect(seq).toEqual([...Array(50).keys()]);
    }
    await rt.close();
  }, 60_000);

  it('a process killed between drain and commit: the next start re-queues and delivers once, FIFO kept', async () => {
    const rt = openRuntime(dir);
    await rt.run({ op: 'create', caller: caller('a'), args: { channel: 'c', role: 'A', role_prompt: 'send' } });
    await rt.run({ op: 'join', caller: caller('p'), args: { channel: 'c', role: 'P', role_prompt: 'receive' } });
    const sent: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: `m${i}` } });
      sent.push(...(r.data as { message_ids: string[] }).message_ids);
    }
    const first = startWorker(['owner', dir, 'p', 'hang']);
    await first.waitFor((l) => l.startsWith('{'));
    expect(prompts(first)[0]!.ids).toEqual(sent);
    const state = await rt.read();
    expect(sent.map((id) => state.messages[id]!.delivery_status)).toEqual(['in_flight', 'in_flight', 'in_flight']);
    await first.stop('SIGKILL');

    const second = startWorker(['owner', dir, 'p']);
    await second.waitFor((l) => l.startsWith('{'));
    await new Promise((r) => setTimeout(r, 300));
    const delivered = prompts(second).flatMap((p) => p.ids);
    expect(delivered).toEqual(sent); // once each, in order
    for (const id of sent) {
      const e = await envelope(rt, id);
      expect(e.delivery_status).toBe('delivered');
      expect(e.attempts).toBe(2);
      expect(e.transitions.map((t) => t[1])).toEqual(['pending', 'in_flight', 'pending', 'in_flight', 'delivered']);
    }
    await rt.close();
  }, 60_000);

  it('a recipient owned by process B gets mail sent from process A without B being poked', async () => {
    const rt = openRuntime(dir); // process A: no driver, owns nobody
    await rt.run({ op: 'create', caller: caller('a'), args: { channel: 'c', role: 'A', role_prompt: 'send' } });
    await rt.run({ op: 'join', caller: caller('b'), args: { channel: 'c', role: 'B', role_prompt: 'receive' } });
    const owner = startWorker(['owner', dir, 'b']);
    await owner.waitFor((l) => l === 'ready');
    const r = await rt.run({ op: 'send', sid: 'a', args: { channel: 'c', content: 'wake up' } });
    const [id] = (r.data as { message_ids: string[] }).message_ids;
    const sentAt = Date.now();
    const line = await owner.waitFor((l) => l.includes(id!), 5000);
    expect(JSON.parse(line).at - sentAt).toBeLessThan(400); // the subscription's event, not the 500 ms rescan
    await new Promise((res) => setTimeout(res, 200));
    expect((await envelope(rt, id!)).delivery_status).toBe('delivered');
    await rt.close();
  }, 30_000);
});
