// Attack suite (issue 8, Prove 3): identity spoofing through every tool's arguments. The attacker
// passes every argument name that could look like an identity (set to the victim's id, role, or an
// operator flag) on every tool, over a real `opencomms mcp --admin` server and through the OpenCode
// plugin in-process (whose tools receive the arguments as given, unfiltered). Whatever it tries,
// the action is the pinned member's (MCP) or the calling session's (OpenCode), and the victim's
// rows, mail and archives are untouched.
import { describe, expect, it } from 'vitest';
import type { Caller } from '../../../src/engine/index.ts';
import { newMemberId } from '../../../src/protocol/ids.ts';
import type { State } from '../../../src/protocol/schema.ts';
import { openRuntime, type Runtime } from '../../../src/runtime/runtime.ts';
import { normaliseWorktree } from '../../../src/runtime/worktree.ts';
import { startMcp } from '../../helpers/mcp-client.ts';
import { tempDirs } from '../../helpers/temp-dirs.ts';
import { IDENTITY_KEYS } from '../mcp-frames.ts';
import { mcpCaller } from '../mcp-fixture.ts';
import { openCode } from './opencode-plugin.ts';

type Result = { ok: boolean; message: string; data?: any };

interface Surface {
  name: string;
  dir: string;
  attacker: string;
  victim: string;
  third: string;
  /** The caller a member of this surface links with (setup goes through the runtime). */
  caller(sid: string): Caller;
  /** A tool call as the attacker. */
  call(tool: string, args: Record<string, unknown>): Promise<Result>;
  tools: string[];
  close(): Promise<void>;
}

/** Every identity-looking argument, pointing at the victim. */
const spoof = (victim: string) =>
  Object.fromEntries(
    IDENTITY_KEYS.map((k) => [
      k,
      k === 'operator'
        ? true
        : /role/.test(k)
          ? 'Victim'
          : ['caller', 'actor', 'identity', '__proto__', 'constructor'].includes(k)
            ? { session_id: victim, sid: victim, operator: true }
            : victim,
    ]),
  );

const tempDir = tempDirs('opencomms-identity-');

async function mcpSurface(): Promise<Surface> {
  const dir = tempDir();
  const [attacker, victim, third] = [newMemberId(), newMemberId(), newMemberId()];
  const h = await startMcp(dir, { pin: attacker, admin: true });
  const tools = ((await h.client.listTools()).tools as Array<{ name: string }>).map((t) => t.name);
  return {
    name: 'MCP',
    dir,
    attacker,
    victim,
    third,
    caller: (sid) => mcpCaller(dir, sid),
    call: (t, a) => h.call(t, a),
    tools,
    close: () => h.close(),
  };
}

async function openCodeSurface(): Promise<Surface> {
  const dir = tempDir();
  const oc = await openCode(dir);
  const [attacker, victim, third] = ['ses_attacker', 'ses_victim', 'ses_third'];
  return {
    name: 'OpenCode',
    dir,
    attacker,
    victim,
    third,
    caller: (sid) => ({
      session_id: sid,
      host: 'opencode',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: sid,
      project_id: 'proj',
      worktree: normaliseWorktree(dir),
    }),
    call: (t, a) => oc.call(attacker, t, a),
    tools: Object.keys(oc.hooks.tool),
    close: async () => {},
  };
}

/** The victim's world: channels the attacker is in and is not in, mail for both, two archives. */
async function setUp(s: Surface, rt: Runtime) {
  const must = async (p: Promise<Result>) => {
    const r = await p;
    if (!r.ok) throw new Error(`${s.name} set-up: ${r.message}`);
    return r;
  };
  const link = (op: 'create' | 'join', sid: string, channel: string, role: string) =>
    must(rt.run({ op, caller: s.caller(sid), args: { channel, role, role_prompt: `${role} prompt` } }));
  await link('create', s.victim, 'team', 'Victim');
  await link('join', s.attacker, 'team', 'Mallory');
  await link('join', s.third, 'team', 'Third');
  await link('create', s.victim, 'vonly', 'Victim');
  await link('join', s.third, 'vonly', 'Third');
  await link('create', s.victim, 'vjoin', 'Victim');
  await link('create', s.attacker, 'asave', 'Mallory');
  await link('join', s.victim, 'asave', 'Victim');
  await link('create', s.victim, 'varch', 'Victim');
  await link('join', s.third, 'varch', 'Third');
  await must(rt.run({ op: 'send', sid: s.third, args: { channel: 'team', content: 'for the victim', to: s.victim } }));
  await must(
    rt.run({ op: 'send', sid: s.third, args: { channel: 'team', content: 'for the attacker', to: s.attacker } }),
  );
  await must(
    rt.run({
      op: 'save_session',
      actor: { sid: s.victim, project_id: s.caller(s.victim).project_id, worktree: s.caller(s.victim).worktree },
      args: { channel: 'varch' },
    }),
  );
}

const members = (st: State, channel: string) => st.channels[channel]?.members.map((m) => m.session_id) ?? [];
const pendingOf = (st: State, sid: string) =>
  (st.queues[sid] ?? []).filter((id) => st.messages[id]?.delivery_status === 'pending');

describe.each([
  ['MCP', mcpSurface],
  ['OpenCode', openCodeSurface],
] as const)('identity spoofing through every tool (%s)', (_n, make) => {
  it("every identity-like argument on every tool is ignored: the action is always the caller's own", async () => {
    const s = await make();
    const rt = openRuntime(s.dir, { log: () => {} });
    await setUp(s, rt);
    const as = spoof(s.victim);
    const covered = new Set<string>();
    const call = async (tool: string, args: Record<string, unknown>) => {
      covered.add(tool);
      return s.call(tool, { ...as, ...args });
    };
    const state = () => rt.read();
    const victimPending = pendingOf(await state(), s.victim);
    expect(victimPending).toHaveLength(1);

    // create / join: the new rows are the attacker's.
    expect((await call('opencomms_create', { channel: 'newch', role: 'Mallory', role_prompt: 'p' })).ok).toBe(true);
    expect(members(await state(), 'newch')).toEqual([s.attacker]);
    expect((await call('opencomms_join', { channel: 'vjoin', role: 'Mallory', role_prompt: 'p' })).ok).toBe(true);
    expect(members(await state(), 'vjoin')).toEqual([s.victim, s.attacker]);

    // send: the envelope's sender is the attacker.
    const sent = await call('opencomms_send', { channel: 'team', content: 'spoofed?', to: s.third });
    expect(sent.ok).toBe(true);
    const env = (await state()).messages[sent.data.message_ids[0]]!;
    expect([env.sender_session_id, env.sender_role]).toEqual([s.attacker, 'Mallory']);

    // reads: the attacker's view only.
    const status = await call('opencomms_status', {});
    expect(status.data.channels.map((c: { name: string }) => c.name).sort()).toEqual(
      ['asave', 'newch', 'team', 'vjoin'].sort(),
    );
    const inbox = await call('opencomms_inbox', { channel: 'team' });
    expect(inbox.data.messages.map((m: { message_id: string }) => m.message_id)).not.toContain(victimPending[0]);
    if (s.tools.includes('opencomms_pull')) {
      const pulled = await call('opencomms_pull', {});
      expect(pulled.data.message_ids).not.toContain(victimPending[0]);
    }
    expect((await call('opencomms_history', { channel: 'vonly' })).data?.reason).toBe('not_member');
    expect(pendingOf(await state(), s.victim)).toEqual(victimPending);

    // changes to a channel: only the attacker's own row, only channels it is in.
    expect((await call('opencomms_update_role', { channel: 'team', role_prompt: 'hijacked' })).ok).toBe(true);
    const team = (await state()).channels.team!;
    expect(team.members.find((m) => m.session_id === s.victim)!.role_prompt).toBe('Victim prompt');
    expect(team.members.find((m) => m.session_id === s.attacker)!.role_prompt).toBe('hijacked');
    for (const tool of ['opencomms_pause', 'opencomms_resume', 'opencomms_disconnect', 'opencomms_save_session'])
      expect([tool, (await call(tool, { channel: 'vonly' })).data?.reason]).toEqual([tool, 'not_member']);
    expect((await call('opencomms_timer', { channel: 'team', action: 'start' })).data.active_member_id).toBe(
      s.attacker,
    );
    expect((await call('opencomms_kick', { channel: 'team', target_session_id: s.third })).data?.reason).toBe(
      'not_coordinator',
    );
    expect(members(await state(), 'team')).toEqual([s.victim, s.attacker, s.third]);

    // sessions: the attacker's archives only.
    expect((await call('opencomms_resume_session', { channel: 'varch' })).data?.reason).toBe('not_archived_member');
    expect((await call('opencomms_delete_session', { channel: 'varch', confirm: true })).data?.reason).toBe(
      'not_archived_member',
    );
    expect((await call('opencomms_delete_session', { channel: 'vonly', confirm: true })).data?.reason).toBe(
      'not_member',
    );
    expect((await call('opencomms_archive', { mode: 'summary', channel: 'varch' })).data?.reason).toBe(
      'not_archived_member',
    );
    expect((await call('opencomms_save_session', { channel: 'asave' })).ok).toBe(true);
    const saved = (await rt.store.archiveByName('asave'))!;
    expect([saved.saved_by, saved.saved_by_role]).toEqual([s.attacker, 'Mallory']);
    const list = await call('opencomms_archive', { mode: 'list' });
    expect(list.data.archives.map((a: { name: string }) => a.name)).toEqual(['asave']);

    // disconnect: the attacker leaves, the victim stays.
    expect((await call('opencomms_disconnect', { channel: 'team' })).ok).toBe(true);
    expect(members(await state(), 'team')).toEqual([s.victim, s.third]);
    expect(members(await state(), 'vonly')).toEqual([s.victim, s.third]);

    expect(s.tools.filter((t) => !covered.has(t))).toEqual([]); // every tool of the surface was attacked
    await rt.close();
    await s.close();
  }, 60_000);
});
