// Delivery on a project shared by machines (docs/computers.md "Whose sessions a process delivers
// to"): a process prompts only sessions on its own machine, the cross-server fallback included, and
// a process that starts on a machine takes back that machine's sessions of its own checkout at once,
// whichever machine made their channel. "This machine" is the test's; the other machine exists only
// as process tags and member rows naming its id.
import { describe, expect, it } from 'vitest';
import type { DeliveryDriver } from '../../src/runtime/delivery.ts';
import { openRuntime, processTag, type Runtime } from '../../src/runtime/runtime.ts';
import { machineId } from '../../src/runtime/machine.ts';
import { tempDirs } from '../helpers/temp-dirs.ts';

const OTHER = 'bbbbbbbb-0000-4000-8000-0000000000b2';
/** A process of the other machine, and one of this machine that no longer runs (no such PID). */
const OTHER_PROCESS = `2147483645@other-box/${OTHER}`;
const DEAD_HERE = processTag(2147483646);
const tmp = tempDirs('oc-machines-');

type Prompt = { rid: string; ids: string[] };

/** A push host that knows only `sessions`: prompting any other session fails, as a real OpenCode
 *  server answers 404 for a session it does not have. */
function host(sessions: string[], crossServer: boolean): DeliveryDriver & { prompts: Prompt[] } {
  const prompts: Prompt[] = [];
  return {
    method: 'push',
    crossServer,
    prompts,
    deliver: async (rid, _text, ids) => {
      prompts.push({ rid, ids });
      if (!sessions.includes(rid)) throw new Error(`prompt refused: 404 session ${rid} not found`);
    },
  };
}

const caller = (sid: string, worktree: string) => ({
  session_id: sid,
  host: 'opencode',
  surface: 'cli',
  delivery_mode: 'push',
  host_session_id: sid,
  project_id: 'proj-shared',
  worktree,
});

async function link(dir: string, tag: string, op: 'create' | 'join', sid: string, channel: string, worktree: string) {
  const rt = openRuntime(dir, { tag, log: () => {} });
  const r = await rt.run({ op, caller: caller(sid, worktree), args: { channel, role: sid, role_prompt: `${sid}.` } });
  expect(r.ok, r.message).toBe(true);
  await rt.close();
}

const waitFor = async (ok: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!ok() && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
  return ok();
};

async function sendAll(rt: Runtime, from: string, channel: string, content: string): Promise<string[]> {
  const r = await rt.run({ op: 'send', sid: from, args: { channel, content, broadcast: true } });
  expect(r.ok, r.message).toBe(true);
  return (r.data as { message_ids: string[] }).message_ids;
}

describe('a process delivers only to sessions on its own machine', () => {
  it("the cross-server fallback prompts an ownerless session of this machine, never one of another machine's", async () => {
    const dir = tmp();
    const driver = host(['ses_a', 'ses_here'], true);
    const a = openRuntime(dir, { driver, log: () => {} });
    const made = await a.run({
      op: 'create',
      caller: caller('ses_a', dir),
      args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.' },
    });
    expect(made.ok, made.message).toBe(true);
    await link(dir, DEAD_HERE, 'join', 'ses_here', 'team', dir);
    await link(dir, OTHER_PROCESS, 'join', 'ses_there', 'team', '/home/b/project');
    // The other machine's process lost its lease, this machine's process died: the sweep leaves
    // both sessions ownerless.
    expect((await a.run({ op: 'sweep', alive: (t) => t === a.tag })).ok).toBe(true);
    const members = (await a.read()).channels.team!.members;
    expect(members.map((m) => [m.session_id, m.machine, m.owner])).toEqual([
      ['ses_a', machineId(), a.tag],
      ['ses_here', machineId(), null],
      ['ses_there', OTHER, null],
    ]);
    const ids = await sendAll(a, 'ses_a', 'team', 'for everyone');
    // The fallback's delay, then its hand-over to this machine's session.
    expect(await waitFor(() => driver.prompts.some((p) => p.rid === 'ses_here'), 10_000)).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    await a.settled();
    expect(driver.prompts.map((p) => p.rid)).toEqual(['ses_here']);
    const s = await a.read();
    const there = ids.map((id) => s.messages[id]).find((e) => e?.recipient_session_id === 'ses_there');
    expect(there).toMatchObject({ delivery_status: 'pending', attempts: 0 });
    await a.close();
  }, 20_000);

  it('a process that starts takes back at once the sessions of its machine and checkout, on a channel made on another machine', async () => {
    const dir = tmp();
    const HERE = '/home/b/project';
    const A = `1@a-box/aaaaaaaa-0000-4000-8000-0000000000a1`;
    await link(dir, A, 'create', 'ses_a', 'team', '/srv/project');
    await link(dir, A, 'join', 'ses_a2', 'team', '/srv/project');
    // This machine's session, linked by a process that is gone (the machine was killed).
    await link(dir, DEAD_HERE, 'join', 'ses_b', 'team', HERE);
    // Another clone on this machine: its own OpenCode looks its sessions up, not this checkout's.
    await link(dir, DEAD_HERE, 'create', 'ses_clone', 'other', '/home/b/other-clone');
    const sender = openRuntime(dir, { tag: A, log: () => {} });
    const ids = await sendAll(sender, 'ses_a', 'team', 'mail that waited');
    await sender.close();

    const driver = host(['ses_b'], false);
    const b = openRuntime(dir, { driver, log: () => {} });
    await b.start();
    const looked: string[] = [];
    const started = Date.now();
    await b.deliveries.reconcile({
      hosts: new Set(['opencode']),
      worktree: HERE,
      label: 'OpenCode',
      lookup: async (id) => {
        looked.push(id);
        return 'alive';
      },
    });
    // Then the delivery scan, as the OpenCode plugin's start-up runs it: no event from the session.
    await b.scan();
    expect(looked).toEqual(['ses_b']);
    const before = await b.read();
    const toB = ids.filter((id) => before.messages[id]?.recipient_session_id === 'ses_b');
    expect(toB).toHaveLength(1);
    expect(await waitFor(() => driver.prompts.some((p) => p.rid === 'ses_b'), 2_000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(2_000);
    await b.settled();
    const s = await b.read();
    expect(s.channels.team!.members.find((m) => m.session_id === 'ses_b')!.owner).toBe(b.tag);
    expect(driver.prompts).toEqual([{ rid: 'ses_b', ids: toB }]);
    // Delivered: the envelope left live state for the history log.
    expect(s.messages[toB[0]!]).toBeUndefined();
    await b.close();
  }, 20_000);
});
