// A project as an MCP member finds it, written through the runtime before any server starts: the
// pinned member and a peer on one channel with mail both ways, and a saved channel of theirs.
import { join } from 'node:path';
import { newMemberId } from '../../src/protocol/ids.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { normaliseWorktree } from '../../src/runtime/worktree.ts';
import type { Caller } from '../../src/engine/index.ts';
import type { Fixture } from './mcp-frames.ts';

export interface McpProject {
  dir: string;
  pin: string;
  peer: string;
  fixture: Fixture;
}

/** The caller an `opencomms mcp` process with this pin builds (default host and project id). */
export const mcpCaller = (dir: string, pin: string): Caller => ({
  session_id: pin,
  host: 'mcp',
  surface: 'mcp',
  delivery_mode: 'pull',
  host_session_id: null,
  project_id: 'local-project',
  worktree: normaliseWorktree(dir),
});

export async function seedMcpProject(dir: string): Promise<McpProject> {
  const pin = newMemberId();
  const peer = newMemberId();
  const rt = openRuntime(dir, { log: () => {} });
  const must = async (p: ReturnType<typeof rt.run>) => {
    const r = await p;
    if (!r.ok) throw new Error(`fixture: ${r.message}`);
    return r.data as Record<string, any>;
  };
  for (const channel of ['fuzz', 'old']) {
    await must(
      rt.run({
        op: 'create',
        caller: mcpCaller(dir, pin),
        args: { channel, role: 'Alpha', role_prompt: 'You are Alpha.' },
      }),
    );
    await must(
      rt.run({
        op: 'join',
        caller: mcpCaller(dir, peer),
        args: { channel, role: 'Beta', role_prompt: 'You are Beta.' },
      }),
    );
    await must(rt.run({ op: 'send', sid: peer, args: { channel, content: `hello from Beta on ${channel}` } }));
  }
  const sent = await must(rt.run({ op: 'send', sid: pin, args: { channel: 'fuzz', content: 'hello from Alpha' } }));
  await must(
    rt.run({
      op: 'save_session',
      actor: { sid: pin, project_id: 'local-project', worktree: normaliseWorktree(dir) },
      args: { channel: 'old', summary: 'Old work.' },
    }),
  );
  await rt.close();
  return {
    dir,
    pin,
    peer,
    fixture: { channel: 'fuzz', ownRole: 'Alpha', peerRole: 'Beta', messageId: sent.message_ids[0], archived: 'old' },
  };
}

const REPO = join(import.meta.dirname, '..', '..');
/** A stack frame, an engine file path, or the repository's location in text meant for an agent. */
export function leaksInternals(text: string): boolean {
  return (
    /^\s*at .+:\d+:\d+\)?$/m.test(text) ||
    /node:internal|file:\/\/|\.(?:ts|mjs|cjs|js):\d+:\d+/.test(text) ||
    text.includes(REPO)
  );
}
