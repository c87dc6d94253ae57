// The two ends of a Codex wake that need no Codex: the wake prompt (fixed text and the waiter's own
// tag, nothing else) and the woken turn's hand-over of the batch held under that tag, committed
// once, in the project's real store.
import { describe, expect, it } from 'vitest';
import { handWokenBatch } from '../../../adapters/codex/wake-hook.ts';
import { wakePrompt, wakeTag } from '../../../adapters/codex/wake-trigger.ts';
import type { Caller } from '../../../src/engine/index.ts';
import { openRuntime, type Runtime } from '../../../src/runtime/runtime.ts';
import { useProject } from '../../helpers/project.ts';

const p = useProject('oc-codex-wake ');
const LEAD = 'sess_aaaaaaaaaaaaaaaaaaaaaaaa',
  CODER = 'sess_bbbbbbbbbbbbbbbbbbbbbbbb';
const WAITER = '4242@some-host';

const caller = (sid: string, host: string): Caller => ({
  session_id: sid,
  host,
  surface: 'mcp',
  delivery_mode: 'pull',
  host_session_id: null,
  project_id: 'local-project',
  worktree: p.dir,
});

async function team(): Promise<Runtime> {
  const rt = openRuntime(p.dir, { log: () => {} });
  expect(
    (
      await rt.run({
        op: 'create',
        caller: caller(LEAD, 'sdk'),
        args: { channel: 'team', role: 'Lead', role_prompt: 'You lead.' },
      })
    ).ok,
  ).toBe(true);
  expect(
    (
      await rt.run({
        op: 'join',
        caller: caller(CODER, 'codex'),
        args: { channel: 'team', role: 'Coder', role_prompt: 'You code.' },
      })
    ).ok,
  ).toBe(true);
  return rt;
}

async function send(rt: Runtime, content: string): Promise<string> {
  const r = await rt.run({ op: 'send', sid: LEAD, args: { channel: 'team', content } });
  expect(r.ok, r.message).toBe(true);
  return (r.data as { message_ids: string[] }).message_ids[0]!;
}

/** A waiter's drain: the batch in flight under the waiter's tag. */
async function drainAs(tag: string): Promise<void> {
  const waiter = openRuntime(p.dir, { log: () => {}, tag });
  try {
    const r = await waiter.run({ op: 'drain', rid: CODER });
    expect(r.ok, r.message).toBe(true);
  } finally {
    await waiter.close();
  }
}

describe('the Codex wake prompt', () => {
  it('names the waiter and nothing else; only the exact prompt is read back', () => {
    const prompt = wakePrompt(WAITER);
    expect(prompt).toBe(
      `[OpenComms] New messages for this session arrived (wake ${WAITER}). They are in the context that follows.`,
    );
    expect(wakeTag(prompt)).toBe(WAITER);
    expect(wakeTag(`${prompt} and more`)).toBeNull();
    expect(wakeTag(`please ${prompt}`)).toBeNull();
    expect(wakeTag(wakePrompt('4242@host) (x'))).toBeNull();
    expect(wakeTag(undefined)).toBeNull();
  });
});

describe("the woken turn's hand-over (UserPromptSubmit)", () => {
  it('commits the batch held under the tag the prompt names and returns exactly its frames, once', async () => {
    const rt = await team();
    try {
      const id = await send(rt, 'hello coder');
      await drainAs(WAITER);
      expect((await rt.read()).messages[id]).toMatchObject({ delivery_status: 'in_flight', in_flight_by: WAITER });

      expect(await handWokenBatch(rt, 'a prompt the user typed', CODER)).toBe('');
      expect(await handWokenBatch(rt, wakePrompt('1@other-host'), CODER)).toBe('');
      const text = await handWokenBatch(rt, wakePrompt(WAITER), CODER);
      expect(text).toContain(`| id: ${id} |`);
      expect(text).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nhello coder\n<<<END_UNTRUSTED_PEER_MESSAGE>>>');
      const state = await rt.read();
      const logged = await rt.store.history(state.channels.team!.id, 10);
      expect(logged.find((e) => e.message_id === id)).toMatchObject({
        delivery_status: 'delivered',
        delivery_method: 'push',
        attempts: 1,
      });
      expect(
        await handWokenBatch(rt, wakePrompt(WAITER), CODER),
        'a second turn with the same prompt gets nothing',
      ).toBe('');
    } finally {
      await rt.close();
    }
  });

  it('shows nothing of a batch the waiter already put back (it goes by the boundary pull instead)', async () => {
    const rt = await team();
    try {
      const id = await send(rt, 'requeued');
      await drainAs(WAITER);
      const env = (await rt.peek()).messages[id]!;
      expect(
        (
          await rt.run({
            op: 'requeue',
            rid: CODER,
            message_ids: [id],
            error: 'not shown in time',
            held: { by: env.in_flight_by!, attempts: [env.attempts] },
          })
        ).ok,
      ).toBe(true);
      expect(await handWokenBatch(rt, wakePrompt(WAITER), CODER)).toBe('');
      expect((await rt.read()).messages[id]).toMatchObject({ delivery_status: 'pending' });
    } finally {
      await rt.close();
    }
  });
});
