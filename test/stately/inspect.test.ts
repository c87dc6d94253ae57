// The inspection events a live project gives (src/inspect/), received in-process through
// @statelyai/inspect's own `createInspector` with a collecting adapter: what Stately Inspector
// would be sent, as it would be sent (JSON). A send, a drain and a sweep, a pull, a pause and a save
// give the expected actors, events and snapshots, in order, and none of the planted peer text.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { inspectStore } from '../../src/inspect/send.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { Subscription } from '../../src/store/index.ts';
import { caller, leaked, play, setUp, storeText, TOKENS } from './scenario.ts';
import { MACHINES } from '../../machines/index.ts';
import { differs, expected, settled, shapeBreaches, summary } from './expect.ts';

let dir: string;
let rt: Runtime;
let sub: Subscription | null = null;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-inspect-'));
  rt = openRuntime(dir);
});
afterEach(async () => {
  await sub?.close();
  await rt.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the inspection events of a live project', () => {
  it('a send, drain, sweep, pull, pause and save: actors, events and snapshots in order, no peer text', async () => {
    await setUp(rt, dir);
    const wire: string[] = [];
    const inspector = createInspector({ send: (e: StatelyInspectionEvent) => void wire.push(JSON.stringify(e)) });
    sub = await inspectStore(rt.store, inspector, { log: () => {} });
    const events = () => wire.map((w) => JSON.parse(w) as StatelyInspectionEvent);
    const ids = await play(rt, dir, async (step, id) => void (await settled(events, step, id)));
    expect(differs(summary(events()), expected(ids))).toBeNull();
    expect(leaked(wire.join('\n'))).toEqual([]);
    // The control: the store holds the peer text the inspector was never sent.
    const stored = leaked(await storeText(dir));
    for (const t of [TOKENS.content1, TOKENS.content2, TOKENS.promptLead, TOKENS.hostPusher, TOKENS.summary])
      expect(stored).toContain(t);
    const configs = Object.fromEntries(Object.entries(MACHINES).map(([n, p]) => [n, p.machine.config]));
    expect(shapeBreaches(events(), configs)).toEqual([]);
    // Every actor but a channel names its channel as parent and root.
    const actors = events().filter((e) => e.type === '@xstate.actor');
    for (const a of actors.filter((x) => !x.sessionId.startsWith('channel:'))) expect(a.rootId).toBe('channel:team');
  });

  it("one channel only (watch --channel, the console's button): another channel's actors are not shown", async () => {
    await setUp(rt, dir);
    const solo = caller(dir, 'sess_solo', 'pull', 'host_solo');
    await rt.run({ op: 'create', caller: solo, args: { channel: 'other', role: 'Solo', role_prompt: 's' } });
    await rt.run({
      op: 'join',
      caller: caller(dir, TOKENS.sidLead, 'pull', TOKENS.hostLead),
      args: { channel: 'other', role: 'Lead', role_prompt: 'l' },
    });
    const wire: StatelyInspectionEvent[] = [];
    sub = await inspectStore(rt.store, createInspector({ send: (e: StatelyInspectionEvent) => void wire.push(e) }), {
      channel: 'team',
      log: () => {},
    });
    await rt.run({ op: 'send', sid: 'sess_solo', args: { channel: 'other', content: 'o', to: 'Lead' } });
    const sent = await rt.run({
      op: 'send',
      sid: TOKENS.sidLead,
      args: { channel: 'team', content: 't', to: 'Pusher' },
    });
    const id = (sent as unknown as { data: { message_ids: string[] } }).data.message_ids[0];
    await settled(() => wire, 'send', id);
    expect(wire.filter((e) => !e.sessionId.includes(':team') && !e.sessionId.startsWith('envelope:'))).toEqual([]);
    expect(wire.filter((e) => e.sessionId.startsWith('envelope:')).map((e) => e.sessionId)).toEqual([`envelope:${id}`]);
  });
});
