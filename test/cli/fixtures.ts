// CLI test fixtures: the CLI run in-process (same `main` the binary runs, output captured), and
// the three kinds of project every command is tried on: empty, live and broken.
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../src/cli/main.ts';
import type { Caller } from '../../src/engine/index.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { resolvePaths } from '../../src/store/index.ts';
import { MEMBER_ID_PLACEHOLDER } from '../../src/doctor/hosts.ts';

export interface CliRun {
  code: number;
  out: string;
  err: string;
  /** stdout parsed as the one `--json` document. */
  json(): { ok: boolean; message: string; data?: any };
}

export async function cli(...argv: string[]): Promise<CliRun> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => void (out += t), err: (t) => void (err += t) });
  return {
    code,
    out,
    err,
    json() {
      const lines = out.trim().split('\n');
      if (lines.length !== 1) throw new Error(`expected exactly one JSON document, got: ${out}`);
      return JSON.parse(lines[0]!);
    },
  };
}

/** Member ids long enough that a full one in doctor's output is noticed (§9, INS-7). */
export const IDS = {
  lead: 'sess_aaaaaaaaaaaaaaaaaaaaaaaa',
  reviewer: 'sess_bbbbbbbbbbbbbbbbbbbbbbbb',
  spawner: 'sess_cccccccccccccccccccccccc',
} as const;

const caller = (dir: string, session_id: string, delivery_mode: string): Caller => ({
  session_id,
  host: 'claude-code',
  surface: 'mcp',
  delivery_mode,
  host_session_id: null,
  project_id: 'local-project',
  worktree: dir,
});

/** A project in use: channel "team" (a pull Lead, a pull Reviewer with pending mail, an unbound
 *  spawn_push member), an empty channel "empty", and a saved channel "old". */
export async function liveProject(dir: string) {
  const rt = openRuntime(dir);
  const must = async (p: Promise<{ ok: boolean; message: string }>) => {
    const r = await p;
    if (!r.ok) throw new Error(r.message);
  };
  try {
    await must(
      rt.run({
        op: 'create',
        caller: caller(dir, IDS.lead, 'pull'),
        args: { channel: 'team', role: 'Lead', role_prompt: 'Lead it.' },
      }),
    );
    await must(
      rt.run({
        op: 'join',
        caller: caller(dir, IDS.reviewer, 'pull'),
        args: { channel: 'team', role: 'Reviewer', role_prompt: 'Review it.' },
      }),
    );
    await must(
      rt.run({
        op: 'join',
        caller: caller(dir, IDS.spawner, 'spawn_push'),
        args: { channel: 'team', role: 'Spawner', role_prompt: 'Spawn.' },
      }),
    );
    await must(
      rt.run({
        op: 'send',
        sid: IDS.lead,
        args: {
          channel: 'team',
          content: 'please review',
          to: 'Reviewer',
          session_description: 'Reviewing the parser',
        },
      }),
    );
    const op = { operator: true as const, project_id: 'cli-local-project', worktree: dir };
    await must(rt.run({ op: 'create_session', actor: op, args: { channel: 'empty', max_members: 4 } }));
    await must(rt.run({ op: 'create_session', actor: op, args: { channel: 'old' } }));
    await must(rt.run({ op: 'save_session', actor: op, args: { channel: 'old', summary: 'An old session.' } }));
  } finally {
    await rt.close();
  }
}

export async function corruptState(dir: string) {
  const p = resolvePaths(dir);
  await mkdir(p.dir, { recursive: true });
  await writeFile(p.state, '{ this is not json');
}

export async function incompatibleState(dir: string) {
  const p = resolvePaths(dir);
  await mkdir(p.dir, { recursive: true });
  await writeFile(p.state, JSON.stringify({ schema_version: 3, channels: {} }));
}

/** A lock left by a process that died: not refreshed for a minute. */
export async function staleLock(dir: string) {
  const p = resolvePaths(dir);
  await mkdir(p.lock, { recursive: true });
  const old = new Date(Date.now() - 60_000);
  await utimes(p.lock, old, old);
}

/** What `opencomms install claude-code` and `install codex` write (FEATURES.md §8.1), with the
 *  member id still the placeholder, written by hand. */
export async function placeholderInstall(dir: string) {
  const abs = join(dir, '.opencomms', 'opencomms-mcp.mjs');
  await mkdir(join(dir, '.opencomms'), { recursive: true });
  await mkdir(join(dir, '.claude'), { recursive: true });
  await mkdir(join(dir, '.codex'), { recursive: true });
  await writeFile(join(dir, '.opencomms', 'claude-code-hooks.mjs'), '// hook runner\n');
  await writeFile(join(dir, '.opencomms', 'claude-code-hooks-full.mjs'), '// hook runner, full path\n');
  const codexHook = {
    hooks: [{ type: 'command', command: 'node .opencomms/claude-code-hooks.mjs auto . --host codex', timeout: 15 }],
  };
  await writeFile(
    join(dir, '.codex', 'hooks.json'),
    JSON.stringify({ hooks: { SessionStart: [codexHook], UserPromptSubmit: [codexHook], Stop: [codexHook] } }),
  );
  await writeFile(abs, '// mcp bundle\n');
  const hook = {
    hooks: [{ type: 'command', command: 'node "${CLAUDE_PROJECT_DIR}/.opencomms/claude-code-hooks.mjs"', timeout: 15 }],
  };
  await writeFile(
    join(dir, '.claude', 'settings.json'),
    JSON.stringify(
      { hooks: { SessionStart: [hook], UserPromptSubmit: [hook], Stop: [hook], SessionEnd: [hook] } },
      null,
      2,
    ),
  );
  await writeFile(
    join(dir, '.mcp.json'),
    JSON.stringify(
      {
        mcpServers: {
          opencomms: {
            type: 'stdio',
            command: 'node',
            args: [abs, dir, '--host', 'claude-code'],
            env: { OPENCOMMS_MEMBER_ID: MEMBER_ID_PLACEHOLDER, OPENCOMMS_MEMBER_ROLE: 'Reviewer' },
          },
        },
      },
      null,
      2,
    ),
  );
  await writeFile(
    join(dir, '.codex', 'config.toml'),
    [
      'model = "o4"',
      '',
      '[mcp_servers.opencomms]',
      'command = "node"',
      `args = ["${abs}", "${dir}", "--host", "codex"]`,
      'cwd = "."',
      '',
      '[mcp_servers.opencomms.env]',
      `OPENCOMMS_MEMBER_ID = "${MEMBER_ID_PLACEHOLDER}"`,
      'OPENCOMMS_MEMBER_ROLE = "Builder"',
      '',
    ].join('\n'),
  );
}
