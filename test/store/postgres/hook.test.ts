// The installed hook runner on a project bound to PostgreSQL, as a real child process: an empty
// queue is answered from the mailbox rows without loading the full path, and waiting mail is
// never missed (the full path hands it over).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { install, installMember } from '../../../src/cli/hosts.ts';
import { openRuntime } from '../../../src/runtime/runtime.ts';
import { writeBinding } from '../../../src/store/binding.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

it('an empty queue is answered from the mailbox rows alone; waiting mail is handed over', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'oc-pg-hook-'));
  const key = newProjectKey('hk');
  cleanup.push(
    () => rm(dir, { recursive: true, force: true }),
    () => dropProject(key),
  );
  const u = new URL(testDatabaseUrl());
  const env: Record<string, string> = { PATH: process.env.PATH!, CLAUDE_PROJECT_DIR: dir };
  if (u.password) env.PGPASSWORD = decodeURIComponent(u.password);
  u.password = '';
  await writeBinding(dir, u.href, key);
  const saved = process.env.PGPASSWORD;
  if (env.PGPASSWORD) process.env.PGPASSWORD = env.PGPASSWORD;
  cleanup.push(async () => {
    if (saved === undefined) delete process.env.PGPASSWORD;
    else process.env.PGPASSWORD = saved;
  });
  await install('claude-code', dir, { detect: async () => 'x', warn: () => {} });
  await installMember(dir, { id: 'sess_bench' });
  const rt = openRuntime(dir, { log: () => {} });
  cleanup.push(() => rt.close());
  const caller = (sid: string) => ({
    session_id: sid,
    host: 'claude-code',
    surface: 'mcp',
    delivery_mode: 'pull',
    host_session_id: null,
    project_id: 'local-project',
    worktree: dir,
  });
  await rt.run({ op: 'create', caller: caller('sess_bench'), args: { channel: 'c', role: 'W', role_prompt: 'w' } });
  await rt.run({ op: 'join', caller: caller('sess_peer'), args: { channel: 'c', role: 'P', role_prompt: 'p' } });
  const runner = join(dir, '.opencomms', 'claude-code-hooks.mjs');
  const hook = (event: string) => {
    const r = spawnSync(process.execPath, [runner, 'auto', dir], {
      input: JSON.stringify({ hook_event_name: event, session_id: 'claude-1', cwd: dir, prompt: 'next' }),
      encoding: 'utf8',
      env,
      timeout: 20_000,
    });
    return JSON.parse(r.stdout) as { hookSpecificOutput?: { additionalContext?: string } };
  };
  hook('SessionStart'); // binds claude-1 to sess_bench

  // The full path replaced by one that leaves a mark: an empty queue must not reach it.
  const full = join(dir, '.opencomms', 'claude-code-hooks-full.mjs');
  const mark = join(dir, 'full-path-ran');
  await copyFile(full, `${full}.real`);
  await writeFile(
    full,
    `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(mark)}, ''); export const handleHook = async () => ({});`,
  );
  expect(hook('UserPromptSubmit')).toEqual({});
  expect(existsSync(mark), 'the empty queue was decided without the full path').toBe(false);

  await copyFile(`${full}.real`, full);
  const sent = await rt.run({ op: 'send', sid: 'sess_peer', args: { channel: 'c', content: 'waiting mail' } });
  const id = (sent.data as { message_ids: string[] }).message_ids[0]!;
  expect(hook('UserPromptSubmit').hookSpecificOutput?.additionalContext).toContain(id);
  expect(hook('UserPromptSubmit')).toEqual({});
});
