// The host commands of the CLI (FEATURES.md §8.3, §9; INS-5): install-member and pins, the hosts
// that are not installed (claude-desktop, chatgpt, unknown), bind, and their exit codes through main().
import { existsSync } from 'node:fs';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { MEMBER_ID_PLACEHOLDER } from '../../adapters/install/member-env.ts';
import { bindSession, install, installMember } from '../../src/cli/hosts.ts';
import { main } from '../../src/cli/main.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { useProject } from '../helpers/project.ts';

const p = useProject();
const quiet = { detect: async () => 'x', warn: () => {} };
const pinOf = async (id: string) => JSON.parse(await p.read(`.opencomms/pins/${id}.json`));

describe('INS-5 install-member', () => {
  it('works without state.json: mints sess_ + 24 hex for claude-code and writes pins/<id>.json', async () => {
    const r = await installMember(p.dir);
    expect(r.code, r.result.message).toBe(0);
    const id = (r.result.data as { member_id: string }).member_id;
    expect(id).toMatch(/^sess_[0-9a-f]{24}$/);
    expect(await pinOf(id)).toMatchObject({ member_id: id, host: 'claude-code', saved_at: expect.any(Number) });
    expect(existsSync(p.at('.opencomms/state.json'))).toBe(false);
    expect(r.result.message).toContain(`OPENCOMMS_MEMBER_ID=${id}`);
  });

  it('pins_exist without --id; --id adds another; the same id and host again is ok and unchanged', async () => {
    await installMember(p.dir);
    expect(await installMember(p.dir)).toMatchObject({ code: 1, result: { data: { reason: 'pins_exist' } } });
    expect((await installMember(p.dir, { id: 'sess_second' })).code).toBe(0);
    const pin = await p.read('.opencomms/pins/sess_second.json');
    const again = await installMember(p.dir, { id: 'sess_second' });
    expect(again).toMatchObject({ code: 0, result: { data: { changed: false } } });
    expect(await p.read('.opencomms/pins/sess_second.json')).toBe(pin);
  });

  it('invalid_member_id and pin_conflict are refused with nothing written', async () => {
    for (const bad of ['../x', '-a', 'a b', 'x'.repeat(65)])
      expect(await installMember(p.dir, { id: bad })).toMatchObject({
        code: 1,
        result: { data: { reason: 'invalid_member_id' } },
      });
    expect(existsSync(p.at('.opencomms'))).toBe(false);
    await installMember(p.dir, { id: 'sess_shared', host: 'codex' });
    expect(await installMember(p.dir, { id: 'sess_shared' })).toMatchObject({
      code: 1,
      result: { data: { reason: 'pin_conflict' } },
    });
    expect((await pinOf('sess_shared')).host).toBe('codex');
  });

  it('replaces the placeholder in .mcp.json (claude-code) and in .codex/config.toml (codex)', async () => {
    await install('claude-code', p.dir, quiet);
    await install('codex', p.dir, quiet);
    const a = await installMember(p.dir, { id: 'sess_claude' });
    expect(a.result.message).toContain('.mcp.json now names it');
    expect(JSON.parse(await p.read('.mcp.json')).mcpServers.opencomms.env.OPENCOMMS_MEMBER_ID).toBe(
      '${OPENCOMMS_MEMBER_ID:-sess_claude}',
    );
    const b = await installMember(p.dir, { host: 'codex', id: 'sess_codex' });
    expect(b.code).toBe(0);
    const toml = await p.read('.codex/config.toml');
    expect((parse(toml) as any).mcp_servers.opencomms.env.OPENCOMMS_PINNED_MEMBER_ID).toBe('sess_codex');
    expect(toml).not.toContain(MEMBER_ID_PLACEHOLDER);
  });

  it('an install after install-member pins the MCP entry to that member at once', async () => {
    await installMember(p.dir, { id: 'sess_early' });
    await install('claude-code', p.dir, quiet);
    expect(JSON.parse(await p.read('.mcp.json')).mcpServers.opencomms.env.OPENCOMMS_MEMBER_ID).toBe(
      '${OPENCOMMS_MEMBER_ID:-sess_early}',
    );
  });
});

describe('hosts that are not installed here', () => {
  it('claude-desktop prints the manual MCP config and writes nothing; chatgpt is host_not_installable; unknown lists the hosts', async () => {
    const d = await install('claude-desktop', p.dir, quiet);
    expect(d.code).toBe(0);
    expect(d.result.message).toContain('"opencomms"');
    expect(d.result.message).toContain('--host');
    expect(await p.snapshot()).toEqual({});
    expect(await install('chatgpt', p.dir, quiet)).toMatchObject({
      code: 1,
      result: { data: { reason: 'host_not_installable' } },
    });
    const u = await install('gemini-cli', p.dir, quiet);
    expect(u.code).toBe(1);
    expect(u.result.message).toContain('opencode, claude-code, codex, claude-desktop');
    expect(await p.snapshot()).toEqual({});
  });

  it('main(): exit codes and output of install / uninstall / install-member', async () => {
    const out: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    const writeErr = process.stderr.write.bind(process.stderr);
    process.stdout.write = ((s: string) => {
      out.push(s);
      return true;
    }) as typeof process.stdout.write;
    process.stderr.write = ((s: string) => {
      out.push(s);
      return true;
    }) as typeof process.stderr.write;
    try {
      expect(await main(['install', 'chatgpt', '--project', p.dir])).toBe(1);
      expect(await main(['install-member', '--project', p.dir, '--name', 'sess_named', '--json'])).toBe(0);
      expect(JSON.parse(out.at(-1)!)).toMatchObject({ ok: true, data: { member_id: 'sess_named' } });
      expect(await main(['uninstall', 'nothing', '--project', p.dir])).toBe(1);
    } finally {
      process.stdout.write = write;
      process.stderr.write = writeErr;
    }
    expect(out.join('')).toContain('opencomms: ChatGPT needs a networked MCP transport');
  });
});

describe('bind (a Codex thread by hand)', () => {
  it("binds the one pinned codex member's rows to the thread id; refuses without a session or a pin", async () => {
    expect(await bindSession(p.dir, { session: 'thread-1' })).toMatchObject({
      code: 1,
      result: { data: { reason: 'identity_unpinned' } },
    });
    await installMember(p.dir, { host: 'codex', id: 'sess_cx' });
    const rt = openRuntime(p.dir);
    const caller = (sid: string, host: string) => ({
      session_id: sid,
      host,
      surface: 'mcp',
      delivery_mode: 'spawn_push',
      host_session_id: null,
      project_id: 'local-project',
      worktree: p.dir,
    });
    await rt.run({
      op: 'create',
      caller: caller('sess_a', 'claude-code'),
      args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.' },
    });
    expect(await bindSession(p.dir, { session: 'thread-1' })).toMatchObject({
      code: 1,
      result: { data: { reason: 'not_member' } },
    });
    await rt.run({
      op: 'join',
      caller: caller('sess_cx', 'codex'),
      args: { channel: 'team', role: 'Coder', role_prompt: 'Code.' },
    });
    expect(await bindSession(p.dir, {})).toMatchObject({ code: 1, result: { data: { reason: 'invalid_argument' } } });
    expect((await bindSession(p.dir, { session: '01a23057-8acd-7aa1-acda-388ccbfc5bbf' })).code).toBe(0);
    const row = (await rt.read()).channels.team!.members.find((m) => m.session_id === 'sess_cx')!;
    expect(row.host_session_id).toBe('01a23057-8acd-7aa1-acda-388ccbfc5bbf');
    await rt.close();
  });
});
