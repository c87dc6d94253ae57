// The OpenCode plugin in a test process, against a fake host client: it records every prompt and
// can refuse the first ones. Used in-process (one server) and by plugin-worker.ts (a second server).
import { OpenCommsPlugin } from '../../adapters/opencode/plugin.ts';

export interface Prompted {
  id: string;
  text: string;
  at: number;
  ok: boolean;
}

/** `unreachable`: sessions whose lookup fails (neither alive nor gone), so start-up leaves them alone. */
export function fakeClient(o: { unreachable?: string[]; refuse?: number } = {}) {
  const prompts: Prompted[] = [];
  let refuse = o.refuse ?? 0;
  const prompt = async ({ path, body }: { path: { id: string }; body: { parts: Array<{ text: string }> } }) => {
    const ok = refuse-- <= 0;
    prompts.push({ id: path.id, text: body.parts.map((p) => p.text).join(''), at: Date.now(), ok });
    return ok ? {} : { error: 'host refused the prompt' };
  };
  const client = {
    session: {
      get: async ({ path }: { path: { id: string } }) =>
        o.unreachable?.includes(path.id) ? { error: 'lookup failed' } : { data: { id: path.id } },
      status: async () => ({ data: {} }),
      messages: async () => ({ data: [] }),
      promptAsync: prompt,
      prompt,
    },
  };
  return { client, prompts };
}

export type PluginHooks = Awaited<ReturnType<typeof OpenCommsPlugin>>;

export async function loadPlugin(
  directory: string,
  client: ReturnType<typeof fakeClient>['client'],
): Promise<PluginHooks> {
  return OpenCommsPlugin({ client, directory, worktree: directory, project: { id: 'local-project' } } as never);
}

/** Calls a plugin tool as the host would, for session `sid`. */
export async function tool(hooks: PluginHooks, name: string, args: Record<string, unknown>, sid: string) {
  const t = (hooks.tool as Record<string, { execute(a: unknown, c: { sessionID: string }): Promise<string> }>)[name]!;
  return JSON.parse(await t.execute(args, { sessionID: sid })) as { ok: boolean; message: string; data?: any };
}

export const idle = (hooks: PluginHooks, sid: string) =>
  hooks.event!({ event: { type: 'session.idle', properties: { sessionID: sid } } } as never);
