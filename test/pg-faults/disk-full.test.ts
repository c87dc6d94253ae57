// A full disk on the PostgreSQL server: sends refuse with `store_unwritable` (data.code
// `disk_full`) and a message saying to free space; a refused send leaves nothing behind (no
// message, no change a cold start would replay); once space is freed the same process sends
// again, and every send that was accepted is there, in order, and is delivered.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Caller } from '../../src/engine/index.ts';
import type { ToolResult } from '../../src/protocol/result.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { PgStore } from '../../src/store/postgres/store.ts';
import { cli } from '../cli/fixtures.ts';
import { tempProject } from '../helpers/store-fixtures.ts';
import { startOnSmallDisk, type SmallDiskServer } from './server.ts';

const KEY = 'full';
const LEAD = 'sess_aaaaaaaaaaaaaaaaaaaaaaaa';
const REVIEWER = 'sess_bbbbbbbbbbbbbbbbbbbbbbbb';

let server: SmallDiskServer;
let project: { dir: string; cleanup: () => Promise<void> };
beforeAll(async () => {
  server = await startOnSmallDisk(64);
  project = await tempProject();
});
afterAll(async () => {
  server?.stop();
  await project?.cleanup();
});

const caller = (session_id: string): Caller => ({
  session_id,
  host: 'claude-code',
  surface: 'mcp',
  delivery_mode: 'pull',
  host_session_id: null,
  project_id: 'local-project',
  worktree: project.dir,
});

/** Content that does not compress, so every send takes room of its own. */
const content = (i: number) => `m${i} ${randomBytes(3000).toString('base64')}`;
const send = (rt: Runtime, i: number) =>
  rt.run({ op: 'send', sid: LEAD, args: { channel: 'disk', content: content(i), to: 'Reviewer' } });

async function stateOfAFreshProcess() {
  const fresh = new PgStore({ url: server.url, key: KEY });
  try {
    return await fresh.read();
  } finally {
    await fresh.close();
  }
}

it('a full server disk refuses sends with store_unwritable, writes nothing half, and loses nothing once freed', async () => {
  expect((await cli('store', 'init', server.url, '--key', KEY, '--json', '--project', project.dir)).json().ok).toBe(
    true,
  );
  const rt = openRuntime(project.dir);
  try {
    const ok = (r: ToolResult) => expect(r).toMatchObject({ ok: true });
    ok(
      await rt.run({
        op: 'create',
        caller: caller(LEAD),
        args: { channel: 'disk', role: 'Lead', role_prompt: 'L.', rate_limit: 1000 },
      }),
    );
    ok(
      await rt.run({
        op: 'join',
        caller: caller(REVIEWER),
        args: { channel: 'disk', role: 'Reviewer', role_prompt: 'R.' },
      }),
    );
    const accepted: string[] = [];
    for (let i = 0; i < 5; i++) {
      ok(await send(rt, i));
      accepted.push(`m${i}`);
    }
    server.fill();
    let refusal: ToolResult | null = null;
    for (let i = 5; i < 900 && !refusal; i++) {
      const r = await send(rt, i);
      if (r.ok) accepted.push(`m${i}`);
      else refusal = r;
    }
    expect(refusal).toMatchObject({ ok: false, data: { reason: 'store_unwritable', code: 'disk_full' } });
    expect(refusal!.message).toMatch(/no room left on its disk.*not made.*Free space/);
    // Refused again while full, and nothing of the refused sends is anywhere.
    expect(await send(rt, 9_999)).toMatchObject({ ok: false, data: { reason: 'store_unwritable' } });
    const firsts = (s: Awaited<ReturnType<typeof stateOfAFreshProcess>>) =>
      Object.values(s.messages).map((m) => m.content.split(' ')[0]);
    expect(firsts(await stateOfAFreshProcess()).sort()).toEqual([...accepted].sort());

    server.free();
    const after = await send(rt, 10_000);
    expect(after).toMatchObject({ ok: true });
    accepted.push('m10000');
    const pulled = await rt.run({ op: 'pull', sid: REVIEWER, args: { limit: 10_000 } });
    expect(pulled.ok).toBe(true);
    const framed = (pulled.data as { messages: Array<{ framed: string }> }).messages.map((m) => m.framed);
    const got = framed.map((f) => /UNTRUSTED_PEER_MESSAGE>>>\n(m\d+) /.exec(f)?.[1]);
    expect(got).toEqual(accepted);
    expect(firsts(await stateOfAFreshProcess())).toEqual([]);
  } finally {
    await rt.close();
  }
});
