// MCP identity (FEATURES.md §7.1, §7.2, §11, MCP-1..3): the pin is the only identity; no pin, a blank
// or a malformed one denies every tool; a pin on no live roster is denied every roster-gated tool;
// identity-like arguments are ignored; a kicked pin loses access on its very next call; and the
// logs, on stderr only, never reveal a pin.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { spawnRaw } from '../../helpers/mcp-client.ts';
import {
  ok,
  pair,
  pinFor,
  readState,
  refused,
  stateText,
  useMcpProject,
  type McpHandle,
} from '../../helpers/mcp-fixture.ts';
import { ALL_TOOLS, NON_ADMIN_TOOLS, posingAs, ROSTER_GATED, sampleArgs } from '../../helpers/mcp-spec.ts';

const projA = { OPENCOMMS_PROJECT_ID: 'proj-a' };
const p = useMcpProject({
  A: { pin: pinFor('a'), admin: true, host: 'claude-code', env: projA }, // coordinator
  B: { pin: pinFor('b'), env: projA },
  E: { pin: pinFor('e'), env: projA }, // on no roster unless a case puts it there
  noPin: { admin: true },
  blankPin: { pin: '   ' },
  badPin: { pin: 'bad pin/../x', admin: true },
});

describe('pins', () => {
  it('MCP-1 identity_unpinned for every tool with no pin, a blank pin and a malformed pin; nothing is written', async () => {
    await pair(p.h.A, p.h.B, 'unpinned');
    const before = stateText(p.dir);
    const args = sampleArgs('unpinned');
    for (const [h, tools] of [
      [p.h.noPin, ALL_TOOLS],
      [p.h.blankPin, NON_ADMIN_TOOLS],
      [p.h.badPin, ALL_TOOLS],
    ] as const)
      for (const tool of tools)
        expect((await refused(h, tool, args[tool]!, 'identity_unpinned')).message).toContain('OPENCOMMS_MEMBER_ID');
    expect(stateText(p.dir)).toBe(before);
  });
});

describe('roster gate', () => {
  it('identity_not_member for every roster-gated tool; tombstones still answer lifecycle_refused; nothing is written', async () => {
    const { A, B, E } = p.h;
    await pair(A, B, 'gated');
    await ok(A, 'opencomms_create', { channel: 'gated-saved', role: 'Alpha', role_prompt: 'p' });
    await ok(A, 'opencomms_save_session', { channel: 'gated-saved' });
    await ok(A, 'opencomms_create', { channel: 'gated-deleted', role: 'Alpha', role_prompt: 'p' });
    await ok(A, 'opencomms_delete_session', { channel: 'gated-deleted', confirm: true });
    await refused(E, 'opencomms_status', {}, 'identity_not_member'); // E is on no live roster
    const before = stateText(p.dir);
    const args = sampleArgs('gated');
    for (const tool of ROSTER_GATED)
      await refused(E, tool, { ...args[tool]!, ...posingAs(p.pin.A) }, 'identity_not_member'); // naming a member gains nothing
    // delete_session is roster-free only for a SAVED channel (§7.2); on a live channel it needs the roster.
    await refused(E, 'opencomms_delete_session', { channel: 'gated', confirm: true }, 'identity_not_member');
    // Tombstone precedence (§3.3): lifecycle_refused wins over identity_not_member.
    await refused(E, 'opencomms_send', { channel: 'gated-saved', content: 'x' }, 'lifecycle_refused');
    await refused(E, 'opencomms_history', { channel: 'gated-saved' }, 'lifecycle_refused');
    expect(
      (await refused(E, 'opencomms_send', { channel: 'gated-deleted', content: 'x' }, 'lifecycle_refused')).data
        .lifecycle,
    ).toBe('deleted');
    // Bootstrap tools check the archived roster instead.
    await refused(E, 'opencomms_resume_session', { channel: 'gated-saved' }, 'not_archived_member');
    expect((await ok(E, 'opencomms_archive', {})).data.archives.map((a: { name: string }) => a.name)).not.toContain(
      'gated-saved',
    );
    expect(stateText(p.dir)).toBe(before);
  });

  it('a pin whose only channel was saved is on no live roster, yet may read, restore and delete that saved channel', async () => {
    const { E } = p.h;
    await ok(E, 'opencomms_create', { channel: 'e-solo', role: 'Epsilon', role_prompt: 'p' });
    await ok(E, 'opencomms_save_session', { channel: 'e-solo' });
    await refused(E, 'opencomms_status', {}, 'identity_not_member');
    expect((await ok(E, 'opencomms_archive', {})).data.archives.map((a: { name: string }) => a.name)).toContain(
      'e-solo',
    );
    expect((await ok(E, 'opencomms_archive', { mode: 'summary', channel: 'e-solo' })).data.compact_context).toContain(
      'e-solo',
    );
    expect((await ok(E, 'opencomms_resume_session', { channel: 'e-solo', new_name: 'e-solo-again' })).data.name).toBe(
      'e-solo-again',
    );
    expect((await ok(E, 'opencomms_delete_session', { channel: 'e-solo', confirm: true })).data).toEqual({
      name: 'e-solo',
      deleted: 'archive',
    });
    expect(readState(p.dir).channels['e-solo']).toMatchObject({ lifecycle: 'deleted' });
  });
});

describe('identity-like arguments', () => {
  it('MCP-2 are ignored: the pinned member is always the sender and the reader; naming another member gains nothing', async () => {
    const { A, B, E } = p.h;
    await pair(A, B, 'spoof');
    await ok(E, 'opencomms_join', { channel: 'spoof', role: 'Epsilon', role_prompt: 'p' });
    const r = await ok(B, 'opencomms_send', {
      channel: 'spoof',
      content: 'who am I',
      to: 'Alpha',
      ...posingAs(p.pin.E),
    });
    const id = r.data.message_ids[0];
    expect(readState(p.dir).messages[id]).toMatchObject({
      sender_session_id: p.pin.B,
      sender_role: 'Beta',
      recipient_session_id: p.pin.A,
    });
    // E naming A cannot read A's mail; A reads its own, whoever the arguments name.
    expect((await ok(E, 'opencomms_pull', { channel: 'spoof', ...posingAs(p.pin.A) })).data.messages).toEqual([]);
    expect((await ok(E, 'opencomms_inbox', { channel: 'spoof', ...posingAs(p.pin.A) })).data.pending).toBe(0);
    const pulled = await ok(A, 'opencomms_pull', { channel: 'spoof', ...posingAs(p.pin.E) });
    expect(pulled.data.message_ids).toEqual([id]);
    expect(pulled.data.messages[0].framed).toContain(`peer session ${p.pin.B} on channel "spoof"`);
    expect(pulled.data.messages[0].framed).not.toContain(p.pin.E);
  });
});

describe('kick revocation', () => {
  it('MCP-3 the coordinator kicks; the kicked pin is denied on its very next call, whatever the tool; the rest keep working', async () => {
    const { A, B, E } = p.h;
    await pair(A, B, 'kc');
    await ok(E, 'opencomms_join', { channel: 'kc', role: 'Kappa', role_prompt: 'You are Kappa.' });
    const toK = (await ok(A, 'opencomms_send', { channel: 'kc', content: 'for kappa', to: 'kappa' })).data
      .message_ids[0];
    expect((await ok(E, 'opencomms_status', {})).data.channels.map((c: { name: string }) => c.name)).toEqual(['kc']);

    const kicked = await ok(A, 'opencomms_kick', { channel: 'kc', target_role: 'KAPPA' });
    expect(kicked.data).toEqual({
      kicked_session_id: p.pin.E,
      kicked_role: 'Kappa',
      remaining_session_ids: [p.pin.A, p.pin.B],
    });
    const rejected = (await ok(A, 'opencomms_history', { channel: 'kc' })).data.messages.find(
      (m: { message_id: string }) => m.message_id === toK,
    );
    expect(rejected.delivery_status).toBe('rejected');
    expect(readState(p.dir).queues[p.pin.E]).toBeUndefined();

    await refused(E, 'opencomms_status', {}, 'identity_not_member');
    await refused(E, 'opencomms_pull', {}, 'identity_not_member');
    await refused(E, 'opencomms_send', { channel: 'kc', content: 'still here?' }, 'identity_not_member');

    // Each remaining member got one system notice, and they keep talking.
    const notice = await ok(B, 'opencomms_pull', { channel: 'kc' });
    expect(notice.data.messages).toHaveLength(1);
    expect(notice.data.messages[0].framed).toContain('type: system');
    expect(notice.data.messages[0].framed).toContain(`Kappa (${p.pin.E}) was removed from channel "kc"`);
    expect((await ok(A, 'opencomms_pull', { channel: 'kc' })).data.messages).toHaveLength(1);
    await ok(A, 'opencomms_send', { channel: 'kc', content: 'after the kick' });
    expect((await ok(B, 'opencomms_pull', { channel: 'kc' })).data.messages).toHaveLength(1);
  });
});

describe('stderr logging', () => {
  const START = '[opencomms-mcp] start:';
  /** Everything the server wrote to stderr so far, once its start line has arrived. */
  async function stderrOf(h: McpHandle): Promise<string> {
    for (let i = 0; i < 200 && !h.stderr.join('').includes(START); i++) await sleep(10);
    return h.stderr.join('');
  }
  const startLine = (err: string) => err.split('\n').find((l) => l.startsWith(START));

  it('logs go to stderr only, each line prefixed; the start line says pin set yes/NO and never prints a pin; --host generic exits 1', async () => {
    const { A, B, E, noPin, blankPin, badPin } = p.h;
    // Drive every server through work and refusals first: none of it may print a pin.
    await refused(E, 'opencomms_status', {}, 'identity_not_member');
    await pair(A, B, 'logs');
    await ok(E, 'opencomms_join', { channel: 'logs', role: 'Epsilon', role_prompt: 'p' });
    await refused(A, 'opencomms_send', { channel: 'logs', content: 'which one?' }, 'recipient_ambiguous');
    await ok(B, 'opencomms_pull', {});
    for (const h of [noPin, blankPin, badPin]) await refused(h, 'opencomms_status', {}, 'identity_unpinned');

    const pinned = [
      [A, p.pin.A],
      [B, p.pin.B],
      [E, p.pin.E],
    ] as const;
    for (const [h, pin] of pinned) {
      const err = await stderrOf(h);
      expect(startLine(err)).toMatch(/pin set yes/);
      expect(err).not.toContain(pin);
      expect(err).not.toContain(pin.slice(5)); // not even the random part
    }
    expect(startLine(await stderrOf(A))).toMatch(/pin set yes, host claude-code, admin yes/);
    expect(startLine(await stderrOf(B))).toMatch(/pin set yes, host mcp, admin no/);
    for (const h of [noPin, blankPin, badPin]) expect(startLine(await stderrOf(h))).toMatch(/pin set NO/);
    expect(await stderrOf(badPin)).not.toContain('bad pin');

    // --host generic is refused at start: exit 1, a reason on stderr, nothing on stdout.
    const generic = spawnRaw(p.dir, { pin: pinFor('g'), host: 'generic' });
    expect(await generic.exited).toBe(1);
    expect(generic.stderr()).toMatch(/^\[opencomms-mcp\] refusing to start \(invalid_argument\): --host "generic"/);
    expect([...generic.lines, ...generic.badLines]).toEqual([]);

    // Every stderr line is ours (prefixed), so nothing else leaks there either.
    for (const err of [
      generic.stderr(),
      ...(await Promise.all(Object.values(p.h).map((h) => stderrOf(h as McpHandle)))),
    ]) {
      const lines = err.split('\n').filter(Boolean);
      expect(lines.length).toBeGreaterThan(0);
      for (const l of lines) expect(l).toMatch(/^\[opencomms-mcp\] /);
    }
  });
});
