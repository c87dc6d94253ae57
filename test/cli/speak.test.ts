// `opencomms send` and `opencomms read` (operator.md "Speaking to the agents"): the operator writes
// into a channel as `Operator`, framed like every message and bound by the channel's rules, and
// reads what the channel said without taking anyone's mail.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { cli, IDS, liveProject } from './fixtures.ts';

let dir: string;
let rt: Runtime;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-speak-'));
  await liveProject(dir);
  rt = openRuntime(dir, { log: () => {} });
});
afterEach(async () => {
  await rt.close();
  await rm(dir, { recursive: true, force: true });
});

const pull = async (sid: string) =>
  (await rt.run({ op: 'pull', sid, args: {} })).data as {
    messages: Array<{ message_id: string; framed: string }>;
  };

describe('the operator speaks', () => {
  it('send reaches the member framed, sender Operator; read shows it with its delivery state and takes nothing', async () => {
    const sent = await cli('send', 'team', 'please rebase on main', '--to', 'Reviewer', '--json', '--project', dir);
    expect(sent.code).toBe(0);
    const doc = sent.json();
    expect(doc).toMatchObject({ ok: true, data: { delivery_status: 'pending', recipients: [{ role: 'Reviewer' }] } });
    const [id] = doc.data.message_ids as string[];

    const before = (await cli('read', 'team', '--project', dir)).out;
    expect(before).toMatch(/Operator → Reviewer \(pending\)/);
    expect(before).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nplease rebase on main\n<<<END_UNTRUSTED_PEER_MESSAGE>>>');
    // The read took nothing: the member still gets its mail, once, framed like a peer's.
    const got = await pull(IDS.reviewer);
    // After the Lead's mail the fixture queued before (FIFO).
    expect(got.messages.map((m) => m.message_id).at(-1)).toBe(id);
    const mine = got.messages.at(-1)!.framed;
    expect(mine).toMatch(/^\[OpenComms\] from Operator \| type: manual \| id: /);
    expect(mine).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nplease rebase on main\n');
    expect((await pull(IDS.reviewer)).messages).toEqual([]);
    expect((await cli('read', 'team', '--project', dir)).out).toMatch(/Operator → Reviewer \(delivered\)/);
  });

  it('broadcast: one envelope per live member, shown once by read', async () => {
    const r = (await cli('send', 'team', 'standup in 5', '--broadcast', '--json', '--project', dir)).json();
    expect(r.ok).toBe(true);
    expect(r.data.recipients.map((x: { role: string }) => x.role).sort()).toEqual(['Lead', 'Reviewer', 'Spawner']);
    const out = (await cli('read', 'team', '--project', dir)).out;
    expect(out.match(/standup in 5/g)).toHaveLength(1);
  });

  it('every rule of a send holds: pause, the duplicate window, an unknown member, an unknown channel', async () => {
    await cli('pause', 'team', '--project', dir);
    const paused = await cli('send', 'team', 'hello', '--to', 'Lead', '--json', '--project', dir);
    expect([paused.code, paused.json().data.reason]).toEqual([1, 'channel_paused']);
    await cli('resume', 'team', '--project', dir);
    expect((await cli('send', 'team', 'once', '--to', 'Lead', '--project', dir)).code).toBe(0);
    const twice = await cli('send', 'team', 'once', '--to', 'Lead', '--json', '--project', dir);
    expect(twice.json().data.reason).toBe('duplicate_content');
    const nobody = await cli('send', 'team', 'hi', '--to', 'Ghost', '--project', dir);
    expect(nobody.code).toBe(1);
    expect(nobody.err).toMatch(/^opencomms: No other member matches "Ghost"/);
    const none = await cli('read', 'nosuch', '--json', '--project', dir);
    expect([none.code, none.json().data.reason]).toEqual([1, 'channel_not_found']);
  });

  it("a peer's escape sequences never reach the operator's terminal", async () => {
    const evil = 'red \u001b[31mALERT\u001b[0m \u202eoverride\u202c end';
    expect(
      (await rt.run({ op: 'send', sid: IDS.lead, args: { channel: 'team', content: evil, to: 'Reviewer' } })).ok,
    ).toBe(true);
    const out = (await cli('read', 'team', '--project', dir)).out;
    expect(out).not.toMatch(/[\u001b\u202e\u202c]/);
    expect(out).toContain('red \\u{1b}[31mALERT\\u{1b}[0m \\u{202e}override\\u{202c} end');
  });
});
