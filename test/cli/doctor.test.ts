// `opencomms doctor [--fix]` (FEATURES.md §9, INS-7): every problem named, exit 1 on FAIL, no id
// printed in full, and --fix repairing only what §9 allows (never installing anything).
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { nodeRow } from '../../src/doctor/doctor.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { resolvePaths } from '../../src/store/index.ts';
import { BUNDLE_MARK, PLUGIN_PATH } from '../../adapters/opencode/install.ts';
import { cli, corruptState, IDS, incompatibleState, liveProject, placeholderInstall, staleLock } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-doctor-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

type Row = { level: string; check: string; detail: string };
const rows = async (...extra: string[]) =>
  (await cli('doctor', '--json', '--project', dir, ...extra)).json().data.rows as Row[];
const rowOf = (list: Row[], check: string) => list.filter((r) => r.check === check);

/** Every file under the project with its bytes, to prove what --fix did not touch. */
async function snapshot(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out[p.slice(root.length + 1)] = await readFile(p, 'utf8');
    }
  };
  await walk(root);
  return out;
}

describe('doctor on an empty and a live project', () => {
  it('empty: every row OK, exit 0, nothing written', async () => {
    const r = await cli('doctor', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out).toContain('[OK] state: no state.json yet; the first change creates it\n');
    for (const check of [
      'corrupt backups',
      'migration',
      'lock',
      'temp files',
      'in-flight mail',
      'opencode',
      'claude-code',
      'codex',
      'member ids',
      'pin files',
      'archives',
      'node',
    ])
      expect(r.out).toMatch(new RegExp(`^\\[OK\\] ${check}: `, 'm'));
    expect(r.out).toMatch(/0 failure\(s\), 0 warning\(s\)\.\n$/);
    expect(await readdir(dir)).toEqual([]);
  });

  it('live: the unbound spawn_push member is a WARN with a shortened id; the exit stays 0', async () => {
    await liveProject(dir);
    const r = await cli('doctor', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out).toContain('[OK] state: schema v2, 2 live channel(s), 1 live envelope(s)');
    expect(r.out).toContain('[WARN] spawn_push members: Spawner on "team" (sess_ccccccc...) has no bound host session');
    expect(r.out).toContain('[OK] archives: 1 saved channel(s)');
    for (const id of Object.values(IDS)) expect(r.out).not.toContain(id);
  });
});

describe('doctor on a broken project', () => {
  it('a corrupt state.json is a FAIL (exit 1) and doctor does not recover it', async () => {
    await corruptState(dir);
    const r = await cli('doctor', '--project', dir);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/\[FAIL\] state: state\.json is corrupt \(not valid JSON/);
    await cli('doctor', '--fix', '--project', dir);
    expect(await readFile(resolvePaths(dir).state, 'utf8')).toBe('{ this is not json');
  });

  it('an incompatible schema is a FAIL; preserved corrupt backups are a WARN', async () => {
    await incompatibleState(dir);
    await writeFile(join(dir, '.opencomms', 'state.corrupt.1700000000000.json'), 'x');
    const list = await rows();
    expect(rowOf(list, 'state')).toMatchObject([
      { level: 'FAIL', detail: expect.stringContaining('schema_version 3') },
    ]);
    expect(rowOf(list, 'corrupt backups')).toMatchObject([
      { level: 'WARN', detail: expect.stringContaining('state.corrupt.1700000000000.json') },
    ]);
    expect((await cli('doctor', '--project', dir)).code).toBe(1);
  });

  it('a stale lock is a WARN that --fix removes; a fresh lock is left alone', async () => {
    await liveProject(dir);
    await staleLock(dir);
    expect(rowOf(await rows(), 'lock')).toMatchObject([
      { level: 'WARN', detail: expect.stringContaining('stale lock') },
    ]);
    const fixed = await cli('doctor', '--fix', '--project', dir);
    expect(fixed.out).toContain('fixed: removed the stale lock .opencomms/.state.lock');
    expect(fixed.out).toContain('[OK] lock: free');
    await mkdir(resolvePaths(dir).lock);
    expect(rowOf(await rows('--fix'), 'lock')).toMatchObject([{ level: 'OK', detail: 'held by a live writer' }]);
  });

  it('placeholder member ids FAIL for Claude Code and Codex; --fix installs nothing and changes no config', async () => {
    await liveProject(dir);
    await placeholderInstall(dir);
    const r = await cli('doctor', '--project', dir);
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      '[FAIL] member ids: claude-code (.mcp.json): the pinned member is still the placeholder; run `opencomms install-member --host claude-code`',
    );
    expect(r.out).toContain(
      '[FAIL] member ids: codex (.codex/config.toml): the pinned member is still the placeholder; run `opencomms install-member --host codex`',
    );
    expect(r.out).toMatch(
      /\[OK\] claude-code: hooks in \.claude\/settings\.json \(4 events\), mcpServers\.opencomms in \.mcp\.json, .* present/,
    );
    expect(r.out).toMatch(
      /\[OK\] codex: \[mcp_servers\.opencomms\] in \.codex\/config\.toml, hooks in \.codex\/hooks\.json \(3 events\), .* present/,
    );
    expect(r.out).toContain('[OK] opencode: not installed');
    const before = await snapshot(dir);
    const fix = await cli('doctor', '--fix', '--project', dir);
    expect(fix.code).toBe(1);
    expect(fix.out).not.toContain('fixed:');
    expect(await snapshot(dir)).toEqual(before);
  });

  it('a real member id is shown shortened; a half install names what is missing', async () => {
    await placeholderInstall(dir);
    const mcp = JSON.parse(await readFile(join(dir, '.mcp.json'), 'utf8'));
    mcp.mcpServers.opencomms.env.OPENCOMMS_MEMBER_ID = IDS.reviewer;
    await writeFile(join(dir, '.mcp.json'), JSON.stringify(mcp));
    const settings = JSON.parse(await readFile(join(dir, '.claude', 'settings.json'), 'utf8'));
    delete settings.hooks.Stop;
    await writeFile(join(dir, '.claude', 'settings.json'), JSON.stringify(settings));
    await rm(join(dir, '.opencomms', 'opencomms-mcp.mjs'));
    const r = await cli('doctor', '--project', dir);
    expect(r.out).toContain('[OK] member ids: claude-code (.mcp.json): sess_bbbbbbb...');
    expect(r.out).not.toContain(IDS.reviewer);
    expect(r.out).toContain(
      '[FAIL] claude-code: incomplete install, missing: hooks in .claude/settings.json (4 events); .opencomms/opencomms-mcp.mjs; run `opencomms install claude-code`',
    );
    expect(r.out).toContain(
      '[FAIL] codex: incomplete install, missing: .opencomms/opencomms-mcp.mjs; run `opencomms install codex`',
    );
    await writeFile(join(dir, '.mcp.json'), '{ broken');
    expect((await cli('doctor', '--project', dir)).out).toContain('[FAIL] claude-code: .mcp.json is malformed');
  });

  it('pin files whose name is not their id FAIL; valid pins are listed shortened', async () => {
    const pins = resolvePaths(dir).pins;
    await mkdir(pins, { recursive: true });
    await writeFile(
      join(pins, `${IDS.lead}.json`),
      JSON.stringify({ member_id: IDS.lead, host: 'claude-code', saved_at: 1 }),
    );
    await writeFile(
      join(pins, 'sess_copy.json'),
      JSON.stringify({ member_id: IDS.reviewer, host: 'claude-code', saved_at: 1 }),
    );
    await writeFile(join(pins, 'bad name.json'), '{}');
    const list = rowOf(await rows(), 'pin files');
    expect(list).toEqual([
      {
        level: 'FAIL',
        check: 'pin files',
        detail: 'pins/bad name.json: file name is not a member id; it is ignored (the file name must equal member_id)',
      },
      {
        level: 'FAIL',
        check: 'pin files',
        detail: `pins/sess_copy.json: member_id ${IDS.reviewer} does not match the file name; it is ignored (the file name must equal member_id)`,
      },
      { level: 'OK', check: 'pin files', detail: 'sess_aaaaaaa... (claude-code)' },
    ]);
  });

  it('temp files of ended processes and their orphaned in-flight mail are WARNs that --fix repairs', async () => {
    await liveProject(dir);
    const p = resolvePaths(dir);
    const deadPid = 2 ** 22 + 17; // above Linux's pid_max default: no such process
    await writeFile(join(p.dir, `.state.${deadPid}.0badc0de.tmp`), 'half');
    await writeFile(join(p.dir, `.state.${process.pid}.12345678.tmp`), 'mine, in progress');
    // A push member whose batch is in flight for a process that is gone.
    const rt = openRuntime(dir);
    const c = {
      session_id: 'sess_push',
      host: 'opencode',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: 'sess_push',
      project_id: 'x',
      worktree: dir,
    };
    await rt.run({ op: 'join', caller: c, args: { channel: 'empty', role: 'Pusher', role_prompt: 'p' } });
    await rt.run({
      op: 'join',
      caller: { ...c, session_id: 'sess_push2', host_session_id: 'sess_push2' },
      args: { channel: 'empty', role: 'Other', role_prompt: 'p' },
    });
    await rt.run({ op: 'send', sid: 'sess_push2', args: { channel: 'empty', content: 'hi' } });
    await rt.store.mutate((s) => {
      for (const e of Object.values(s.messages))
        if (e.recipient_session_id === 'sess_push')
          Object.assign(e, { delivery_status: 'in_flight', in_flight_by: `${deadPid}@${hostname()}`, attempts: 1 });
      s.queues.sess_push = [];
      return { changed: true, result: null };
    });
    await rt.close();
    const before = await rows();
    expect(rowOf(before, 'temp files')).toMatchObject([
      { level: 'WARN', detail: expect.stringContaining(`.state.${deadPid}.0badc0de.tmp`) },
    ]);
    expect(rowOf(before, 'temp files')[0]!.detail).not.toContain(String(process.pid));
    expect(rowOf(before, 'in-flight mail')).toMatchObject([
      { level: 'WARN', detail: '1 envelope(s) in flight for ended processes; --fix re-queues them' },
    ]);
    const fix = await cli('doctor', '--fix', '--project', dir);
    expect(fix.out).toContain(`fixed: removed .state.${deadPid}.0badc0de.tmp (left by ended process ${deadPid})`);
    expect(fix.out).toContain('fixed: swept in-flight mail of ended processes: 1 re-queued, 0 dead-lettered');
    expect(fix.out).toContain('[OK] in-flight mail: none orphaned');
    expect(await readdir(p.dir)).toContain(`.state.${process.pid}.12345678.tmp`);
  });

  it('an installed OpenCode bundle whose config entry went missing FAILs; --fix re-registers only that', async () => {
    await mkdir(join(dir, '.opencode', 'plugins'), { recursive: true });
    await writeFile(join(dir, PLUGIN_PATH), `${BUNDLE_MARK}\n// bundle\n`);
    await writeFile(join(dir, 'opencode.jsonc'), '{\n  // keep me\n  "model": "x"\n}\n');
    const r = await cli('doctor', '--project', dir);
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      '[FAIL] opencode: plugin bundle present but not registered in opencode.jsonc; `opencomms doctor --fix` re-registers it',
    );
    const fix = await cli('doctor', '--fix', '--project', dir);
    expect(fix.code).toBe(0);
    expect(fix.out).toContain('fixed: Registered .opencode/plugins/opencomms.js in opencode.jsonc.');
    expect(await readFile(join(dir, 'opencode.jsonc'), 'utf8')).toContain('// keep me');
    expect(fix.out).toContain('[OK] opencode: plugin bundle present and registered in opencode.jsonc');
    // --fix never installs an absent integration: a registered entry without a bundle stays a FAIL.
    await rm(join(dir, PLUGIN_PATH));
    const missing = await cli('doctor', '--fix', '--project', dir);
    expect(missing.code).toBe(1);
    expect(missing.out).toContain('but missing; run `opencomms install opencode`');
    expect(await readdir(join(dir, '.opencode', 'plugins'))).toEqual([]);
  });

  it('--json is one document with every row; the Node check compares versions', async () => {
    const j = (await cli('doctor', '--json', '--project', dir)).json();
    expect(j).toMatchObject({ ok: true, message: '0 failure(s), 0 warning(s).', data: { fixed: [] } });
    expect(nodeRow('20.19.0').level).toBe('OK');
    expect(nodeRow('22.1.0').level).toBe('OK');
    expect(nodeRow('20.18.9').level).toBe('FAIL');
    expect(nodeRow('18.20.0').level).toBe('FAIL');
  });
});
