// Attack suite (issue 8, Prove 3): the same payloads through the OpenCode plugin in-process. The
// attacker is one OpenCode session, the recipient another; what the recipient's model receives is
// every prompt the host was asked to inject, every tool result, the `/OpenComms` slash output and
// the system text the plugin adds to its turns.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAYLOADS, PROMPT_CANARY, receivedBreaches, type Received } from './oracle.ts';
import { openCode, type OpenCode } from './opencode-plugin.ts';

const X = 'ses_attacker';
const R = 'ses_reader';

let dir: string;
let oc: OpenCode;
const received: Received[] = [];
const result = async (where: string, name: string, args: Record<string, unknown>) => {
  const t = await oc.tool(R, name, args);
  received.push([where, t, 'result']);
  return JSON.parse(t) as { ok: boolean; message: string; data?: any };
};
const text = (where: string, t: string) => {
  received.push([where, t, 'text']);
  return t;
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'opencomms-escape-oc-'));
  oc = await openCode(dir);
  expect(
    (
      await oc.call(X, 'opencomms_create', {
        channel: 'team',
        role: 'Mallory',
        role_prompt: `${PAYLOADS[0]!.text} ${PROMPT_CANARY}`,
        rate_limit: 1000,
      })
    ).ok,
  ).toBe(true);
  expect(
    (await oc.call(R, 'opencomms_join', { channel: 'team', role: 'Reader', role_prompt: 'Read carefully.' })).ok,
  ).toBe(true);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('every peer-controlled string stays inside the frame (OpenCode plugin)', () => {
  it('names, roles and reply_to holding payloads are refused', async () => {
    for (const p of PAYLOADS) {
      expect([
        p.name,
        (await oc.call(X, 'opencomms_send', { channel: 'team', content: 'hi', reply_to: p.text })).data?.reason,
      ]).toEqual([p.name, 'invalid_argument']);
      expect([
        p.name,
        (await oc.call(X, 'opencomms_join', { channel: 'team', role: p.text, role_prompt: 'x' })).data?.reason,
      ]).toEqual([p.name, 'invalid_role']);
      expect([
        p.name,
        (await oc.call(X, 'opencomms_create', { channel: p.text, role: 'Mallory', role_prompt: 'x' })).data?.reason,
      ]).toEqual([p.name, 'invalid_channel_name']);
    }
  });

  it('content: the prompts injected into the recipient session, inbox, history, status and the slash output', async () => {
    const ids: string[] = [];
    for (const p of PAYLOADS) {
      const r = await oc.call(X, 'opencomms_send', { channel: 'team', content: p.text, session_description: p.text });
      expect([p.name, r.ok]).toEqual([p.name, true]);
      ids.push(...r.data.message_ids);
    }
    await result('inbox', 'opencomms_inbox', { channel: 'team', limit: 100 });
    text('slash Inbox', await oc.slash(R, 'Inbox Channel=team'));
    // The recipient turns idle until every message was injected (one batch per idle turn).
    const injected = () =>
      oc.host.prompts
        .filter((p) => p.session === R)
        .map((p) => p.text)
        .join('\n');
    for (let t = 0; t < 100 && !ids.every((id) => injected().includes(`| id: ${id} |`)); t++) {
      await oc.idle(R);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(ids.filter((id) => !injected().includes(`| id: ${id} |`))).toEqual([]);
    for (const p of oc.host.prompts) if (p.session === R) text('injected prompt', p.text);
    expect(oc.host.prompts.filter((p) => p.session === X)).toEqual([]); // nothing went to the attacker
    await result('history', 'opencomms_history', { channel: 'team', limit: 100 });
    await result('status', 'opencomms_status', {});
    text('slash History', await oc.slash(R, 'History Channel=team'));
    text('slash Status', await oc.slash(R, 'Status'));
  }, 30_000);

  it("the recipient's system text holds its own role prompt and never the attacker's", async () => {
    const sys = text('system transform', await oc.system(R));
    expect(sys).toContain('Read carefully.');
    expect(sys).not.toContain(PROMPT_CANARY);
  });

  it('save summary and final note: archive reads and the compact_context a joiner of the restored channel gets', async () => {
    const summary = PAYLOADS.filter((p) => p.text.length < 300)
      .map((p) => p.text)
      .join('\n')
      .slice(0, 2000);
    expect((await oc.call(X, 'opencomms_save_session', { channel: 'team', summary })).ok).toBe(true);
    for (const p of PAYLOADS)
      expect([
        p.name,
        (await oc.call(X, 'opencomms_resume_session', { channel: 'team', new_name: p.text })).data?.reason,
      ]).toEqual([p.name, 'invalid_channel_name']);
    await result('archive list', 'opencomms_archive', { mode: 'list' });
    await result('archive summary', 'opencomms_archive', { mode: 'summary', channel: 'team' });
    await result('archive messages', 'opencomms_archive', { mode: 'messages', channel: 'team', limit: 500 });
    expect((await result('resume', 'opencomms_resume_session', { channel: 'team' })).ok).toBe(true);
    const joined = await result('join (resumed)', 'opencomms_join', {
      channel: 'team',
      role: 'Reader',
      role_prompt: 'Read carefully.',
    });
    expect(joined.data.compact_context).toContain('CANARYEXACT'); // the summary arrived (inside its frame)
    await result('status after resume', 'opencomms_status', {});
  });

  it("nothing the recipient received breaks the frame; the attacker's role prompt reached it nowhere", () => {
    expect(received.length).toBeGreaterThan(10);
    expect(receivedBreaches(received)).toEqual([]);
  });
});
