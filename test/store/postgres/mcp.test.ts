// The MCP server on a project bound to PostgreSQL: two servers on one project talk through the
// database, in order, and no state file appears on disk. (They share one folder: a channel
// belongs to the worktree path it was created in, so agents on two machines need the same path.)
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { writeBinding } from '../../../src/store/binding.ts';
import { ok, pinFor, type McpHandle } from '../../helpers/mcp-fixture.ts';
import { startMcp } from '../../helpers/mcp-client.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';
import { tempProject } from '../../helpers/store-fixtures.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The test server's URL without its password (a binding records none); the password goes to
 *  the servers through PGPASSWORD, as a user's environment would give it. */
function bindingUrl() {
  const u = new URL(testDatabaseUrl());
  const password = decodeURIComponent(u.password);
  u.password = '';
  const env: Record<string, string> = password ? { PGPASSWORD: password } : {};
  return { url: u.toString(), env };
}

it('two MCP servers on a project bound to PostgreSQL exchange messages in order through it', async () => {
  const key = newProjectKey('m');
  cleanups.push(() => dropProject(key));
  const { url, env } = bindingUrl();
  const t = await tempProject();
  cleanups.push(t.cleanup);
  await writeBinding(t.dir, url, key);
  const dirs = [t.dir, t.dir];
  const [pa, pb] = [pinFor('a'), pinFor('b')];
  const a: McpHandle = await startMcp(dirs[0]!, { pin: pa, env });
  cleanups.push(() => a.close());
  const b: McpHandle = await startMcp(dirs[1]!, { pin: pb, env });
  cleanups.push(() => b.close());
  await ok(a, 'opencomms_create', { channel: 'team', role: 'Alpha', role_prompt: 'You are Alpha.' });
  await ok(b, 'opencomms_join', { channel: 'team', role: 'Beta', role_prompt: 'You are Beta.' });
  for (let i = 0; i < 10; i++) await ok(a, 'opencomms_send', { channel: 'team', content: `message number ${i}` });
  const pulled = await ok(b, 'opencomms_pull', { limit: 100 });
  const text = JSON.stringify(pulled);
  const at = Array.from({ length: 10 }, (_, i) => text.indexOf(`message number ${i}`));
  expect(at.every((x) => x >= 0)).toBe(true);
  expect([...at].sort((x, y) => x - y)).toEqual(at);
  for (const dir of dirs) expect(existsSync(join(dir, '.opencomms', 'state.json'))).toBe(false);
}, 60_000);
