// Attack suite (issue 8, Prove 3): a peer's strings never get outside the untrusted frame, over
// real MCP servers. The attacker (its own `opencomms mcp`) puts every payload into everything it
// controls: content, reply_to, role, role prompt, session description, save summary (and so the
// final note), channel and archive names. The recipients are a pull member behind its own MCP
// server and a push member whose owner runtime records every prompt. Every text they receive
// (prompts, pull, inbox, history, status, archive list/summary/messages, join compact_context)
// must hold the payloads' canary words only inside frames, with paired markers, and no marker
// look-alike as written.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newMemberId } from '../../../src/protocol/ids.ts';
import { openRuntime, type Runtime } from '../../../src/runtime/runtime.ts';
import { normaliseWorktree } from '../../../src/runtime/worktree.ts';
import { startMcp, type McpHandle } from '../../helpers/mcp-client.ts';
import {
  breaches,
  NEUTRALISED,
  outsideFrame,
  PAYLOADS,
  PROMPT_CANARY,
  receivedBreaches,
  type Received,
} from './oracle.ts';

const X = newMemberId(); // the attacker
const R = newMemberId(); // a pull recipient behind its own MCP server
const P = 'sess_push_recipient'; // a push recipient, delivered by an owner runtime in this process

let dir: string;
let attacker: McpHandle;
let recipient: McpHandle;
let owner: Runtime;
const prompts: Array<{ ids: string[]; text: string }> = [];
/** Every text the recipients' models received, by where it came from. */
const received: Received[] = [];

const text = async (h: McpHandle, tool: string, args: Record<string, unknown>) => {
  const r = (await h.raw(tool, args)) as { content: Array<{ text: string }> };
  return r.content[0]!.text;
};
const receive = async (where: string, tool: string, args: Record<string, unknown>) => {
  const t = await text(recipient, tool, args);
  received.push([where, t, 'result']);
  return JSON.parse(t) as { ok: boolean; data?: any };
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'opencomms-escape-'));
  [attacker, recipient] = await Promise.all([startMcp(dir, { pin: X }), startMcp(dir, { pin: R })]);
  const created = await attacker.call('opencomms_create', {
    channel: 'team',
    role: 'Mallory',
    role_prompt: `${PAYLOADS[0]!.text} ${PROMPT_CANARY}`,
    rate_limit: 1000,
  });
  expect(created.ok).toBe(true);
  expect((await recipient.call('opencomms_join', { channel: 'team', role: 'Reader', role_prompt: 'Read.' })).ok).toBe(
    true,
  );
  owner = openRuntime(dir, {
    deliverOnChange: true,
    log: () => {},
    driver: {
      method: 'push',
      owns: (rid) => rid === P,
      deliver: async (_rid, t, ids) => void prompts.push({ ids, text: t }),
    },
  });
  await owner.start();
  const joined = await owner.run({
    op: 'join',
    caller: {
      session_id: P,
      host: 'test',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: P,
      project_id: 'local-project',
      worktree: normaliseWorktree(dir),
    },
    args: { channel: 'team', role: 'Pusher', role_prompt: 'Receive.' },
  });
  expect(joined.ok).toBe(true);
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([attacker?.close(), recipient?.close(), owner?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

describe('the oracle can fail', () => {
  it('flags a canary outside a frame, an early end marker, and an un-neutralised look-alike', () => {
    const p = PAYLOADS[1]!;
    expect(
      breaches('t', `<<<UNTRUSTED_PEER_MESSAGE>>>\nok\n<<<END_UNTRUSTED_PEER_MESSAGE>>>\n${p.canary}`, [p]),
    ).toHaveLength(1);
    expect(
      outsideFrame('<<<UNTRUSTED_PEER_MESSAGE>>> a <<<END_UNTRUSTED_PEER_MESSAGE>>> b <<<END_UNTRUSTED_PEER_MESSAGE>>>')
        .balanced,
    ).toBe(false);
    expect(
      outsideFrame('<<<UNTRUSTED_PEER_MESSAGE>>> a <<<UNTRUSTED_PEER_MESSAGE>>> b <<<END_UNTRUSTED_PEER_MESSAGE>>>')
        .balanced,
    ).toBe(false);
    expect(
      breaches('t', `<<<UNTRUSTED_PEER_MESSAGE>>>\nhi ${p.lookalike} ${p.canary}\n<<<END_UNTRUSTED_PEER_MESSAGE>>>`, [
        p,
      ]),
    ).toEqual(['t: "lower case, inner spaces" reached the recipient un-neutralised']);
    expect(breaches('t', `<<<UNTRUSTED_PEER_MESSAGE>>>\n${p.canary}\n<<<END_UNTRUSTED_PEER_MESSAGE>>>`, [p])).toEqual(
      [],
    );
  });
});

describe('every peer-controlled string stays inside the frame (MCP)', () => {
  it('names, roles and reply_to holding payloads are refused before anything is stored', async () => {
    for (const p of PAYLOADS) {
      const send = await attacker.call('opencomms_send', {
        channel: 'team',
        content: 'hi',
        reply_to: p.text,
        broadcast: true,
      });
      expect([p.name, send.data?.reason]).toEqual([p.name, 'invalid_argument']);
      const role = await attacker.call('opencomms_create', { channel: 'other', role: p.text, role_prompt: 'x' });
      expect([p.name, role.data?.reason]).toEqual([p.name, 'invalid_role']);
      const name = await attacker.call('opencomms_create', { channel: p.text, role: 'Mallory', role_prompt: 'x' });
      expect([p.name, name.data?.reason]).toEqual([p.name, 'invalid_channel_name']);
    }
  });

  it('content and session description: push prompts, pull, inbox, history and status', async () => {
    const sent: string[] = [];
    const forR: string[] = [];
    for (const p of PAYLOADS) {
      const r = await attacker.call('opencomms_send', {
        channel: 'team',
        content: p.text,
        broadcast: true,
        session_description: p.text.slice(0, 300),
      });
      expect([p.name, r.ok]).toEqual([p.name, true]);
      // A payload larger than one part (the 100,000-character value) is queued as parts.
      const queued: string[][] = r.data.part_message_ids ?? r.data.message_ids.map((id: string) => [id]);
      sent.push(...queued.flat());
      forR.push(...queued[r.data.recipients.findIndex((x: { session_id: string }) => x.session_id === R)]!);
    }
    await receive('inbox', 'opencomms_inbox', { channel: 'team', limit: 100 });
    await receive('history', 'opencomms_history', { channel: 'team', limit: 100 });
    await receive('status', 'opencomms_status', {});
    // One answer shows only what fits the host's tool result: the reader pulls until nothing waits.
    const messages: Array<{ message_id: string }> = [];
    for (let remaining = 1, i = 0; remaining > 0 && i < 50; i++) {
      const pulled = await receive('pull', 'opencomms_pull', { limit: 100 });
      messages.push(...pulled.data.messages);
      remaining = pulled.data.remaining;
    }
    expect(messages.map((m) => m.message_id)).toEqual(forR);
    const forP = new Set(sent);
    for (const m of messages) forP.delete(m.message_id);
    for (let t = 0; t < 200 && prompts.flatMap((x) => x.ids).length < forP.size; t++)
      await new Promise((r) => setTimeout(r, 50));
    expect(new Set(prompts.flatMap((x) => x.ids))).toEqual(forP);
    for (const x of prompts) received.push(['push prompt', x.text, 'text']);
    // Not vacuous: every payload's marker arrived, neutralised.
    expect(
      prompts
        .map((x) => x.text)
        .join('')
        .split(NEUTRALISED).length - 1,
    ).toBeGreaterThanOrEqual(PAYLOADS.length - 1);
  }, 30_000);

  it('a session description per payload (one channel each): status and the recipient sees each framed', async () => {
    for (const [i, p] of PAYLOADS.entries()) {
      expect(
        (await attacker.call('opencomms_create', { channel: `desc-${i}`, role: 'Mallory', role_prompt: 'x' })).ok,
      ).toBe(true);
      expect(
        (await recipient.call('opencomms_join', { channel: `desc-${i}`, role: 'Reader', role_prompt: 'Read.' })).ok,
      ).toBe(true);
      const r = await attacker.call('opencomms_send', {
        channel: `desc-${i}`,
        content: `described ${i}`,
        session_description: p.text,
      });
      expect(r.data.session_description).toBeTruthy();
    }
    const status = await receive('status (descriptions)', 'opencomms_status', {});
    expect(status.data.channels.filter((c: { description: string | null }) => c.description !== null)).toHaveLength(
      PAYLOADS.length + 1,
    );
    await receive('pull (descriptions)', 'opencomms_pull', { limit: 100 });
  });

  it('save summary and final note: archive list, summary and messages, and the join compact_context of the restored channel', async () => {
    const summary = PAYLOADS.filter((p) => p.text.length < 300)
      .map((p) => p.text)
      .join('\n')
      .slice(0, 2000);
    expect((await attacker.call('opencomms_save_session', { channel: 'team', summary })).ok).toBe(true);
    for (const p of PAYLOADS) {
      const r = await attacker.call('opencomms_resume_session', { channel: 'team', new_name: p.text });
      expect([p.name, r.data?.reason]).toEqual([p.name, 'invalid_channel_name']);
    }
    await receive('archive list', 'opencomms_archive', { mode: 'list' });
    expect((await receive('archive summary', 'opencomms_archive', { mode: 'summary', channel: 'team' })).ok).toBe(true);
    expect(
      (await receive('archive messages', 'opencomms_archive', { mode: 'messages', channel: 'team', limit: 500 })).ok,
    ).toBe(true);
    expect((await receive('resume', 'opencomms_resume_session', { channel: 'team' })).ok).toBe(true);
    const joined = await receive('join compact_context', 'opencomms_join', {
      channel: 'team',
      role: 'Reader',
      role_prompt: 'Read.',
    });
    expect(joined.data.compact_context).toContain('CANARYEXACT'); // the summary arrived (inside its frame)
    await receive('status after resume', 'opencomms_status', {});
  });

  it("nothing the recipients received breaks the frame; the attacker's role prompt reached nobody", () => {
    expect(received.length).toBeGreaterThan(10);
    expect(receivedBreaches(received)).toEqual([]);
  });
});
