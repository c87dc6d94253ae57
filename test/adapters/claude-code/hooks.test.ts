// The installed hook runner as a real child process (FEATURES.md §8.2, HK-1..HK-6): what Claude
// Code (or Codex) gets on stdout for each event, which member a session binds to, and that every
// hand-over commits exactly once. Members are made the way the MCP server makes them (host
// claude-code, pull, no host session) in the project's real store.
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { installMember, install } from '../../../src/cli/hosts.ts';
import { processTag } from '../../../src/runtime/process.ts';
import { openRuntime, type Runtime } from '../../../src/runtime/runtime.ts';
import type { Caller } from '../../../src/engine/index.ts';
import { useProject } from '../../helpers/project.ts';

const frameIds = (text: string) => [...text.matchAll(/\| id: (ocm_[0-9a-f]+) \|/g)].map((m) => m[1]!);

const p = useProject('oc-hooks ');
const quiet = { detect: async () => 'x', warn: () => {} };

interface Hook {
  out: any;
  code: number | null;
  ms: number;
}

/** Runs `.opencomms/claude-code-hooks.mjs [args]` with `input` on stdin, as Claude Code would. */
function hook(input: Record<string, unknown>, o: { args?: string[]; env?: Record<string, string> } = {}): Hook {
  const t = performance.now();
  const r = spawnSync(process.execPath, [p.at('.opencomms/claude-code-hooks.mjs'), ...(o.args ?? [])], {
    input: JSON.stringify(input),
    encoding: 'utf8',
    env: { PATH: process.env.PATH!, CLAUDE_PROJECT_DIR: p.dir, ...o.env },
    timeout: 20_000,
  });
  const ms = performance.now() - t;
  expect(r.stderr, 'the runner writes nothing to stderr').toBe('');
  return { out: JSON.parse(r.stdout), code: r.status, ms };
}

const ev = (name: string, session_id: string, extra: Record<string, unknown> = {}) => ({
  hook_event_name: name,
  session_id,
  cwd: p.dir,
  ...extra,
});

const mcpCaller = (sid: string, host = 'claude-code'): Caller => ({
  session_id: sid,
  host,
  surface: 'mcp',
  delivery_mode: 'pull',
  host_session_id: null,
  project_id: 'local-project',
  worktree: p.dir,
});

async function team(members: Array<[string, string, string?]>): Promise<Runtime> {
  await install('claude-code', p.dir, quiet);
  const rt = openRuntime(p.dir, { log: () => {} });
  const [[first, role, host], ...rest] = members;
  await rt.run({
    op: 'create',
    caller: mcpCaller(first!, host),
    args: { channel: 'team', role, role_prompt: `You are the ${role}. Be brief.` },
  });
  for (const [sid, r, h] of rest)
    await rt.run({
      op: 'join',
      caller: mcpCaller(sid, h),
      args: { channel: 'team', role: r, role_prompt: `You are the ${r}.` },
    });
  return rt;
}

const send = async (rt: Runtime, from: string, content: string, to?: string) => {
  const r = await rt.run({ op: 'send', sid: from, args: { channel: 'team', content, ...(to ? { to } : {}) } });
  expect(r.ok, r.message).toBe(true);
  return (r.data as { message_ids: string[] }).message_ids[0]!;
};

const until = async (ok: () => Promise<boolean>, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
};

const status = async (rt: Runtime, id: string) => {
  const s = await rt.read();
  return s.messages[id] ?? (await rt.store.history(s.channels.team!.id, 50)).find((e) => e.message_id === id);
};

describe('HK-1 SessionStart binds the pin and drains', () => {
  it('role block and framed mail in additionalContext; the mail is committed as push', async () => {
    await installMember(p.dir, { id: 'sess_builder' });
    const rt = await team([
      ['sess_builder', 'Builder'],
      ['sess_peer', 'Reviewer', 'codex'],
    ]);
    const id = await send(rt, 'sess_peer', 'please review PR 7');
    const { out, code } = hook(ev('SessionStart', 'claude-1', { source: 'startup' }));
    expect(code).toBe(0);
    expect(out.hookSpecificOutput.hookEventName).toBe('SessionStart');
    const ctx: string = out.hookSpecificOutput.additionalContext;
    expect(ctx).toContain(
      '## OpenComms role instructions\nYou are Builder in the OpenComms channel "team".\nYou are the Builder. Be brief.',
    );
    expect(ctx).toContain(`[OpenComms] from Reviewer | type: manual | id: ${id} |`);
    expect(ctx).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nplease review PR 7\n<<<END_UNTRUSTED_PEER_MESSAGE>>>');
    expect(ctx.indexOf('role instructions')).toBeLessThan(ctx.indexOf('[OpenComms] from'));
    const row = (await rt.read()).channels.team!.members.find((m) => m.session_id === 'sess_builder')!;
    expect(row.host_session_id).toBe('claude-1');
    expect(await status(rt, id)).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push' });
    // Nothing is delivered twice.
    expect(hook(ev('UserPromptSubmit', 'claude-1', { prompt: 'hi' })).out).toEqual({});
    await rt.close();
  });
});

describe('HK-2 stale members and the empty queue', () => {
  it('a stale member is cleared at start; an empty queue answers {} with nothing else', async () => {
    await installMember(p.dir, { id: 'sess_builder' });
    const rt = await team([
      ['sess_builder', 'Builder'],
      ['sess_peer', 'Reviewer', 'codex'],
    ]);
    hook(ev('SessionStart', 'claude-1', { source: 'startup' }));
    hook(ev('SessionEnd', 'claude-1', { reason: 'exit' }));
    expect((await rt.read()).channels.team!.members[0]!.stale).toBe(true);
    expect(
      hook(ev('SessionStart', 'claude-1', { source: 'resume' })).out.hookSpecificOutput.additionalContext,
    ).toContain('You are Builder');
    expect((await rt.read()).channels.team!.members[0]!.stale).toBe(false);
    const before = await p.read('.opencomms/state.json');
    const { out } = hook(ev('UserPromptSubmit', 'claude-1', { prompt: 'hello' }));
    expect(out).toEqual({});
    expect(await p.read('.opencomms/state.json')).toBe(before);
    await rt.close();
  });

  it('the empty-queue answer loads no process, network, crypto or stream module (each prompt would pay for them)', async () => {
    await installMember(p.dir, { id: 'sess_builder' });
    const rt = await team([['sess_builder', 'Builder']]);
    hook(ev('SessionStart', 'claude-1', { source: 'startup' }));
    // A preload that writes, as the process exits, the Node modules it loaded.
    const dir = await mkdtemp(join(tmpdir(), 'oc-modules-'));
    const list = join(dir, 'modules.txt');
    await writeFile(
      join(dir, 'preload.cjs'),
      `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(list)}, process.moduleLoadList.join('\\n')));`,
    );
    const { out } = hook(ev('UserPromptSubmit', 'claude-1', { prompt: 'hello' }), {
      env: { NODE_OPTIONS: `--require ${join(dir, 'preload.cjs')}` },
    });
    expect(out).toEqual({});
    const loaded = (await readFile(list, 'utf8')).split('\n');
    expect(loaded).toContain('NativeModule fs');
    expect(loaded.filter((m) => /^NativeModule (child_process|net|dgram|tty|crypto|stream|v8)$/.test(m))).toEqual([]);
    await rm(dir, { recursive: true, force: true });
    await rt.close();
  });

  it('a Node without process.getBuiltinModule (older than the runner takes) gets {} and exit 0', async () => {
    await installMember(p.dir, { id: 'sess_builder' });
    const rt = await team([['sess_builder', 'Builder']]);
    const dir = await mkdtemp(join(tmpdir(), 'oc-old-node-'));
    await writeFile(join(dir, 'preload.cjs'), 'delete process.getBuiltinModule;');
    const r = hook(ev('SessionStart', 'claude-1', { source: 'startup' }), {
      env: { NODE_OPTIONS: `--require ${join(dir, 'preload.cjs')}` },
    });
    // On a Node that has it, this SessionStart binds the member and answers its role block.
    expect(r).toMatchObject({ out: {}, code: 0 });
    expect(
      hook(ev('SessionStart', 'claude-1', { source: 'startup' })).out.hookSpecificOutput.additionalContext,
    ).toContain('You are Builder');
    await rm(dir, { recursive: true, force: true });
    await rt.close();
  });
});

describe('HK-3 two sessions, each its own mail', () => {
  it("sequential installs and binds map each Claude session to its member; neither reads the other's mail", async () => {
    await installMember(p.dir, { id: 'sess_a' });
    const rt = await team([
      ['sess_a', 'Alpha'],
      ['sess_lead', 'Lead', 'codex'],
    ]);
    hook(ev('SessionStart', 'claude-A', { source: 'startup' }));
    await installMember(p.dir, { id: 'sess_b' });
    await rt.run({
      op: 'join',
      caller: mcpCaller('sess_b'),
      args: { channel: 'team', role: 'Beta', role_prompt: 'You are Beta.' },
    });
    hook(ev('SessionStart', 'claude-B', { source: 'startup' }));
    const toA = await send(rt, 'sess_lead', 'for alpha only', 'Alpha');
    const toB = await send(rt, 'sess_lead', 'for beta only', 'Beta');
    const a = hook(ev('UserPromptSubmit', 'claude-A', { prompt: 'next' })).out.hookSpecificOutput.additionalContext;
    const b = hook(ev('UserPromptSubmit', 'claude-B', { prompt: 'next' })).out.hookSpecificOutput.additionalContext;
    expect(a).toContain(toA);
    expect(a).not.toContain(toB);
    expect(b).toContain(toB);
    expect(b).not.toContain(toA);
    await rt.close();
  });
});

describe('HK-4 binding rules', () => {
  it('several unbound pins bind nothing and say how to fix it; OPENCOMMS_MEMBER_ID decides', async () => {
    await installMember(p.dir, { id: 'sess_a' });
    await installMember(p.dir, { id: 'sess_b' });
    const rt = await team([
      ['sess_a', 'Alpha'],
      ['sess_b', 'Beta'],
      ['sess_lead', 'Lead', 'codex'],
    ]);
    const mail = await send(rt, 'sess_lead', 'for beta', 'Beta');
    const { out } = hook(ev('SessionStart', 'claude-X', { source: 'startup' }));
    expect(out.systemMessage).toMatch(/2 pinned claude-code members are unbound.*one at a time.*OPENCOMMS_MEMBER_ID/);
    expect(out.hookSpecificOutput).toBeUndefined();
    expect((await rt.read()).channels.team!.members.every((m) => m.host_session_id === null)).toBe(true);
    const bound = hook(ev('UserPromptSubmit', 'claude-X', { prompt: 'go' }), {
      env: { OPENCOMMS_MEMBER_ID: 'sess_b' },
    }).out;
    expect(bound.hookSpecificOutput.additionalContext).toContain(mail);
    await rt.close();
  });

  it("A's pin never binds or drains for B; a stale member is rebindable by a new session", async () => {
    await installMember(p.dir, { id: 'sess_a' });
    const rt = await team([
      ['sess_a', 'Alpha'],
      ['sess_lead', 'Lead', 'codex'],
    ]);
    hook(ev('SessionStart', 'claude-A', { source: 'startup' }));
    const toA = await send(rt, 'sess_lead', 'alpha mail');
    // Another Claude session in the same project: A is bound to a live session, so it is no candidate.
    expect(hook(ev('UserPromptSubmit', 'claude-B', { prompt: 'me?' })).out).toEqual({});
    expect((await status(rt, toA))!.delivery_status).toBe('pending');
    // A's session ends; the next session takes the member over (after /clear, a resume...).
    hook(ev('SessionEnd', 'claude-A', { reason: 'clear' }));
    const next = hook(ev('SessionStart', 'claude-A2', { source: 'clear' })).out.hookSpecificOutput.additionalContext;
    expect(next).toContain(toA);
    await rt.close();
  });
});

describe('HK-5 the installed runner with no subcommand; fail-open', () => {
  it('dispatches on hook_event_name; a broken state or garbage input gives {} and exit 0', async () => {
    await installMember(p.dir, { id: 'sess_a' });
    const rt = await team([
      ['sess_a', 'Alpha'],
      ['sess_lead', 'Lead', 'codex'],
    ]);
    expect(hook(ev('SessionStart', 'c1', { source: 'startup' })).out.hookSpecificOutput.hookEventName).toBe(
      'SessionStart',
    );
    await rt.close();
    await writeFile(p.at('.opencomms/state.json'), '{"schema_version": 99}');
    for (const input of [ev('UserPromptSubmit', 'c1'), ev('Stop', 'c1'), { nonsense: true }, ev('Unknown', 'c1')]) {
      const r = hook(input);
      expect(r.code).toBe(0);
      expect(r.out).toEqual({});
    }
    const garbage = spawnSync(process.execPath, [p.at('.opencomms/claude-code-hooks.mjs'), 'auto', p.dir], {
      input: 'not json',
      encoding: 'utf8',
    });
    expect([garbage.status, JSON.parse(garbage.stdout)]).toEqual([0, {}]);
  });

  it('Codex runs the same runner with --host codex: its thread binds to the codex member', async () => {
    await installMember(p.dir, { id: 'sess_cx', host: 'codex' });
    const rt = await team([
      ['sess_lead', 'Lead'],
      ['sess_cx', 'Coder', 'codex'],
    ]);
    const id = await send(rt, 'sess_lead', 'codex, build it');
    const r = hook(ev('UserPromptSubmit', 'thread-9', { prompt: 'x' }), {
      args: ['auto', p.dir, '--host', 'codex'],
      env: { CLAUDE_PROJECT_DIR: '' },
    });
    expect(r.out.hookSpecificOutput.additionalContext).toContain(id);
    expect((await rt.read()).channels.team!.members.find((m) => m.session_id === 'sess_cx')!.host_session_id).toBe(
      'thread-9',
    );
    await rt.close();
  });
});

describe('HK-6 Stop', () => {
  it('continues the turn with the batch as context (rendered once) when mail waits; nothing when stop_hook_active is true', async () => {
    await installMember(p.dir, { id: 'sess_a' });
    const rt = await team([
      ['sess_a', 'Alpha'],
      ['sess_lead', 'Lead', 'codex'],
    ]);
    hook(ev('SessionStart', 'c1', { source: 'startup' }));
    const id = await send(rt, 'sess_lead', 'one more thing');
    expect(hook(ev('Stop', 'c1', { stop_hook_active: true })).out).toEqual({});
    expect((await status(rt, id))!.delivery_status).toBe('pending');
    const { out } = hook(ev('Stop', 'c1', { stop_hook_active: false }));
    expect(out.decision).toBeUndefined();
    expect(out.hookSpecificOutput.hookEventName).toBe('Stop');
    expect(frameIds(out.hookSpecificOutput.additionalContext)).toEqual([id]);
    expect(await status(rt, id)).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push' });
    expect(hook(ev('Stop', 'c1', { stop_hook_active: false })).out).toEqual({});
    await rt.close();
  });

  it('Codex: no frame goes through the Stop reason (Codex escapes it); a fixed notice sends the model to opencomms_pull', async () => {
    await installMember(p.dir, { id: 'sess_cx', host: 'codex' });
    const rt = await team([
      ['sess_lead', 'Lead'],
      ['sess_cx', 'Coder', 'codex'],
    ]);
    const codex = { args: ['auto', p.dir, '--host', 'codex'], env: { CLAUDE_PROJECT_DIR: '' } };
    hook(ev('SessionStart', 'thread-1', { source: 'startup' }), codex);
    const id = await send(rt, 'sess_lead', 'sent <<<during>>> the turn & more');
    const { out } = hook(ev('Stop', 'thread-1', { stop_hook_active: false }), codex);
    expect(out).toEqual({
      decision: 'block',
      reason:
        'OpenComms: 1 new message(s) from your channel peers are waiting. Call the opencomms_pull tool to read them before you finish.',
    });
    expect((await status(rt, id))!.delivery_status).toBe('pending');
    const pulled = await rt.run({ op: 'pull', sid: 'sess_cx', args: {} });
    expect((pulled.data as { message_ids: string[] }).message_ids).toEqual([id]);
    expect(hook(ev('Stop', 'thread-1', { stop_hook_active: false }), codex).out).toEqual({});
    await rt.close();
  });
});

describe('order as the model reads it', () => {
  /** `sess_a` bound to Claude session c1; `n` messages queued from the lead. */
  async function queued(n: number) {
    await installMember(p.dir, { id: 'sess_a' });
    const rt = await team([
      ['sess_a', 'Alpha'],
      ['sess_lead', 'Lead', 'codex'],
    ]);
    hook(ev('SessionStart', 'c1', { source: 'startup' }));
    const ids: string[] = [];
    for (let i = 1; i <= n; i++) ids.push(await send(rt, 'sess_lead', `U${String(i).padStart(2, '0')}`));
    return { rt, ids };
  }
  const claude = String(process.pid);

  it("the woken turn's prompt hook hands nothing newer (its context would sit before the wake); the turn's Stop hands the rest after it", async () => {
    const { rt, ids } = await queued(4);
    // The waiter took the first message and woke the session with it.
    const waiter = openRuntime(p.dir, { tag: processTag(Number(claude)), log: () => {} });
    await waiter.run({ op: 'drain', rid: 'sess_a', opts: { max: 1 } });
    await waiter.close();
    const wake = `OpenComms delivered new mail ... [OpenComms] from Lead | type: manual | id: ${ids[0]} | reply_to: none`;
    expect(hook(ev('UserPromptSubmit', 'c1', { prompt: wake }), { env: { CLAUDE_PID: claude } }).out).toEqual({});
    // Committed off the turn's critical path (a detached process).
    await until(async () => (await status(rt, ids[0]!))!.delivery_status === 'delivered');
    expect(await status(rt, ids[0]!)).toMatchObject({ attempts: 1 });
    for (const id of ids.slice(1)) expect((await status(rt, id))!.delivery_status).toBe('pending');
    const stop = hook(ev('Stop', 'c1', { stop_hook_active: false }), { env: { CLAUDE_PID: claude } }).out;
    expect(frameIds(stop.hookSpecificOutput.additionalContext)).toEqual(ids.slice(1));
    await rt.close();
  });

  it('while a batch is in flight (a held wake, a spawned run), no boundary hands newer mail over', async () => {
    const { rt, ids } = await queued(3);
    const spawner = openRuntime(p.dir, { tag: processTag(Number(claude)), log: () => {} });
    await spawner.run({ op: 'drain', rid: 'sess_a', opts: { max: 1 } });
    await spawner.close();
    expect(
      hook(ev('SessionStart', 'c1', { source: 'resume' })).out.hookSpecificOutput?.additionalContext ?? '',
    ).not.toContain('[OpenComms] from');
    expect(hook(ev('UserPromptSubmit', 'c1', { prompt: 'typed by the user' })).out).toEqual({});
    expect(hook(ev('Stop', 'c1', { stop_hook_active: false })).out).toEqual({});
    for (const id of ids.slice(1)) expect((await status(rt, id))!.delivery_status).toBe('pending');
    // Once the batch is committed, the next boundary hands the rest over, oldest first.
    const first = (await rt.peek()).messages[ids[0]!]!;
    await rt.run({
      op: 'commit',
      rid: 'sess_a',
      message_ids: [ids[0]!],
      method: 'spawn_push',
      held: { by: first.in_flight_by!, attempts: [first.attempts] },
    });
    expect(
      frameIds(hook(ev('Stop', 'c1', { stop_hook_active: false })).out.hookSpecificOutput.additionalContext),
    ).toEqual(ids.slice(1));
    await rt.close();
  });
});

describe('spawn_push members and the session hooks', () => {
  async function spawnMember() {
    await installMember(p.dir, { id: 'sess_sp' });
    const rt = await team([['sess_lead', 'Lead', 'codex']]);
    const caller = { ...mcpCaller('sess_sp'), delivery_mode: 'spawn_push' as const };
    expect(
      (await rt.run({ op: 'join', caller, args: { channel: 'team', role: 'Worker', role_prompt: 'ROLE-WORKER.' } })).ok,
    ).toBe(true);
    await rt.run({ op: 'bind', member: 'sess_sp', host: 'claude-code', host_session_id: 'c-sp' });
    return rt;
  }

  it('a SessionEnd does not mark a spawn_push member stale (a spawned run ended, not the member); a push member is marked', async () => {
    const rt = await spawnMember();
    hook(ev('SessionEnd', 'c-sp', { reason: 'other' }));
    expect((await rt.read()).channels.team!.members.find((m) => m.session_id === 'sess_sp')!.stale).toBe(false);
    expect((await rt.run({ op: 'send', sid: 'sess_lead', args: { channel: 'team', content: 'next batch' } })).ok).toBe(
      true,
    );
    await rt.close();
  });

  it("the role block is given at a session's start, and on a resume only when its transcript lacks it", async () => {
    const rt = await spawnMember();
    const first = hook(ev('SessionStart', 'c-sp', { source: 'startup' })).out.hookSpecificOutput
      .additionalContext as string;
    expect(first).toContain('ROLE-WORKER.');
    // The host keeps the hook's context in the transcript (JSON lines, JSON escapes).
    await writeFile(p.at('t.jsonl'), `${JSON.stringify({ type: 'attachment', content: first })}\n`);
    expect(hook(ev('SessionStart', 'c-sp', { source: 'resume', transcript_path: p.at('t.jsonl') })).out).toEqual({});
    await writeFile(p.at('t2.jsonl'), '{"type":"user","message":"EARLIER-RUN"}\n');
    expect(
      hook(ev('SessionStart', 'c-sp', { source: 'resume', transcript_path: p.at('t2.jsonl') })).out.hookSpecificOutput
        .additionalContext,
    ).toContain('ROLE-WORKER.');
    await rt.close();
  });
});

describe('wake hand-overs are confirmed by the woken turn', () => {
  /** A bound member with one message that a waiter drained in flight under `claudePid`'s tag. */
  async function heldByWaiter(content: string, claudePid: number) {
    await installMember(p.dir, { id: 'sess_a' });
    const rt = await team([
      ['sess_a', 'Alpha'],
      ['sess_lead', 'Lead', 'codex'],
    ]);
    hook(ev('SessionStart', 'c1', { source: 'startup' }));
    const id = await send(rt, 'sess_lead', content);
    const waiter = openRuntime(p.dir, { tag: processTag(claudePid), log: () => {} });
    await waiter.run({ op: 'drain', rid: 'sess_a' });
    await waiter.close();
    return { rt, id };
  }
  /** A live process stands in for Claude Code. */
  const claude = String(process.pid);

  it("a batch in flight under this Claude Code process is committed when the turn's prompt shows it, not before", async () => {
    const { rt, id } = await heldByWaiter('wake up', Number(claude));
    expect((await status(rt, id))!.delivery_status).toBe('in_flight');
    // A prompt typed before the wake turn does not confirm it, and does not hand it over again.
    expect(hook(ev('UserPromptSubmit', 'c1', { prompt: 'unrelated' }), { env: { CLAUDE_PID: claude } }).out).toEqual(
      {},
    );
    expect((await status(rt, id))!.delivery_status).toBe('in_flight');
    // The woken turn's prompt shows it: the hook answers at once and the commit follows off the
    // turn's critical path (a detached process).
    const woke = `Stop hook blocking error ... [OpenComms] from Lead | type: manual | id: ${id} | reply_to: none`;
    expect(hook(ev('UserPromptSubmit', 'c1', { prompt: woke }), { env: { CLAUDE_PID: claude } }).out).toEqual({});
    await until(async () => (await status(rt, id))!.delivery_status === 'delivered');
    expect(await status(rt, id)).toMatchObject({ delivery_method: 'push', attempts: 1 });
    await rt.close();
  });

  it("without a UserPromptSubmit hook, the woken turn's Stop confirms from the transcript", async () => {
    const { rt, id } = await heldByWaiter('wake up', Number(claude));
    await writeFile(
      p.at('transcript.jsonl'),
      `{"type":"user","message":{"content":"[OpenComms] from Lead | type: manual | id: ${id} | reply_to: none"}}\n`,
    );
    expect(
      hook(ev('Stop', 'c1', { stop_hook_active: true, transcript_path: p.at('transcript.jsonl') }), {
        env: { CLAUDE_PID: claude },
      }).out,
    ).toEqual({});
    expect(await status(rt, id)).toMatchObject({ delivery_status: 'delivered', delivery_method: 'push', attempts: 1 });
    await rt.close();
  });

  it('a wake Claude Code holds during a busy turn is not confirmed by its queue record; newer mail waits behind it', async () => {
    const { rt, id } = await heldByWaiter('m1 during the turn', Number(claude));
    const m2 = await send(rt, 'sess_lead', 'm2 during the turn');
    const frame = `[OpenComms] from Lead | type: manual | id: ${id} | reply_to: none`;
    // As Claude Code 2.1.332 writes it when the wake arrives mid-turn: queued, not yet shown.
    await writeFile(
      p.at('transcript.jsonl'),
      `${JSON.stringify({ type: 'queue-operation', operation: 'enqueue', content: frame })}\n`,
    );
    const atStop = hook(ev('Stop', 'c1', { stop_hook_active: false, transcript_path: p.at('transcript.jsonl') }), {
      env: { CLAUDE_PID: claude },
    }).out;
    expect(atStop).toEqual({});
    expect((await status(rt, id))!.delivery_status).toBe('in_flight');
    expect((await status(rt, m2))!.delivery_status).toBe('pending');
    // Shown: the queued command reaches the turn (an attachment line).
    await writeFile(
      p.at('transcript.jsonl'),
      `${JSON.stringify({ type: 'attachment', attachment: { type: 'queued_command', prompt: frame } })}\n`,
      { flag: 'a' },
    );
    const next = hook(ev('Stop', 'c1', { stop_hook_active: false, transcript_path: p.at('transcript.jsonl') }), {
      env: { CLAUDE_PID: claude },
    }).out;
    expect(await status(rt, id)).toMatchObject({ delivery_status: 'delivered', attempts: 1 });
    expect(frameIds(next.hookSpecificOutput.additionalContext)).toEqual([m2]);
    await rt.close();
  });

  it('a batch held by a Claude Code process that is gone goes back to the queue and is delivered at the next boundary', async () => {
    const dead = Number(
      spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout,
    );
    const { rt, id } = await heldByWaiter('orphaned', dead);
    const { out } = hook(ev('UserPromptSubmit', 'c1', { prompt: 'anything new?' }));
    expect(out.hookSpecificOutput.additionalContext).toContain(id);
    expect(await status(rt, id)).toMatchObject({ delivery_status: 'delivered', attempts: 2 });
    await rt.close();
  });
});

describe('a hook hands over only what its host shows whole (docs/hosts.md "What each route shows whole")', () => {
  /** Unique tokens at the start, middle and end of a text of `n` characters. */
  const tokened = (tag: string, n: number) => {
    const [a, m, z] = [`<${tag}-A>`, `<${tag}-M>`, `<${tag}-Z>`];
    const half = Math.floor((n - a.length - m.length - z.length) / 2);
    return a + 'x'.repeat(half) + m + 'x'.repeat(n - a.length - m.length - z.length - half) + z;
  };
  const contents = (ctx: string) =>
    [...ctx.matchAll(/<<<UNTRUSTED_PEER_MESSAGE>>>\n([\s\S]*?)\n<<<END_UNTRUSTED_PEER_MESSAGE>>>/g)].map((m) => m[1]!);

  for (const host of ['claude-code', 'codex'] as const)
    it(`${host}: six messages of 2,900 characters and one of 20,000 reach the model whole over several prompts, each delivered only when handed over`, async () => {
      await installMember(p.dir, { id: 'sess_builder', host });
      if (host === 'codex') await install('codex', p.dir, quiet);
      const rt = await team([
        ['sess_builder', 'Builder', host],
        ['sess_peer', 'Reviewer', 'codex'],
      ]);
      const texts = [1, 2, 3, 4, 5, 6].map((i) => tokened(`M${i}`, 2900));
      texts.push(tokened('BIG', 20_000));
      for (const t of texts) await send(rt, 'sess_peer', t);
      const limit = host === 'codex' ? 9_500 : 10_000;
      const args = host === 'codex' ? { args: ['--host', 'codex'] } : {};
      const seen: string[] = [];
      for (let turn = 0; turn < 12; turn++) {
        const { out } = hook(
          turn === 0
            ? ev('SessionStart', 'claude-1', { source: 'startup' })
            : ev('UserPromptSubmit', 'claude-1', { prompt: `turn ${turn}` }),
          args,
        );
        const ctx: string | undefined = out.hookSpecificOutput?.additionalContext;
        if (!ctx) break;
        expect(ctx.length).toBeLessThanOrEqual(limit);
        expect(Buffer.byteLength(ctx)).toBeLessThanOrEqual(limit);
        const state = await rt.read();
        // Every envelope handed over here is delivered; everything not yet shown is still pending.
        for (const id of frameIds(ctx))
          expect(state.messages[id]?.delivery_status ?? 'delivered (in history)').toMatch(/delivered/);
        seen.push(...contents(ctx));
        if (seen.join('') !== texts.join('')) expect(ctx).toMatch(/more message\(s\) are waiting.*opencomms_pull/);
      }
      expect(seen.join('')).toBe(texts.join(''));
      expect(Object.values((await rt.read()).messages).filter((e) => e.delivery_status !== 'delivered')).toEqual([]);
      await rt.close();
    });
});
