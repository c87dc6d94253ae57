// A channel of two through real file stores: the operations the damage tests break (create, join,
// send, pull) and what a fresh process sees afterwards. Each `proc` is its own FileStore and
// Runtime, with its own cache: a separate process as far as the store can tell.
import type { Caller } from '../../src/engine/index.ts';
import type { ToolResult } from '../../src/protocol/result.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { FileStore, type FileStoreOptions } from '../../src/store/file/store.ts';

export const caller = (session_id: string, delivery_mode = 'pull'): Caller => ({
  session_id,
  host: 'test',
  surface: 'mcp',
  delivery_mode,
  host_session_id: null,
  project_id: 'local-project',
  worktree: '/w',
});

export interface Proc {
  store: FileStore;
  rt: Runtime;
  close(): Promise<void>;
}

export function proc(dir: string, options: FileStoreOptions = {}): Proc {
  const store = new FileStore(dir, options);
  const rt = new Runtime(store, { log: () => {} });
  return {
    store,
    rt,
    close: async () => {
      await rt.close();
      await store.close();
    },
  };
}

export const CHANNEL = 'c';

/** A creates the channel, B joins it (B pulls its mail). */
export async function pair(p: Proc): Promise<void> {
  const made = await p.rt.run({
    op: 'create',
    caller: caller('a'),
    args: { channel: CHANNEL, role: 'A', role_prompt: 'send', rate_limit: 100000 },
  });
  if (!made.ok) throw new Error(`create: ${made.message}`);
  const joined = await p.rt.run({
    op: 'join',
    caller: caller('b'),
    args: { channel: CHANNEL, role: 'B', role_prompt: 'read' },
  });
  if (!joined.ok) throw new Error(`join: ${joined.message}`);
}

export const send = (p: Proc, content: string): Promise<ToolResult> =>
  p.rt.run({ op: 'send', sid: 'a', args: { channel: CHANNEL, content, to: 'B' } });

/** B's pull: the contents it received, in order (the framed text's last line is the content). */
export async function pull(p: Proc): Promise<{ result: ToolResult; contents: string[] }> {
  const result = await p.rt.run({ op: 'pull', sid: 'b', args: { limit: 100 } });
  const messages = (result.data as { messages?: Array<{ framed: string }> } | undefined)?.messages ?? [];
  return { result, contents: messages.map((m) => contentOf(m.framed)) };
}

/** The contents of every envelope live in the state, oldest first (what B has not pulled yet). */
export async function live(p: Proc): Promise<string[]> {
  const state = await p.store.read();
  return Object.values(state.messages).map((m) => m.content);
}

const contentOf = (framed: string): string =>
  /<<<UNTRUSTED_PEER_MESSAGE>>>\n([\s\S]*)\n<<<END_UNTRUSTED_PEER_MESSAGE>>>/.exec(framed)?.[1] ?? '';
