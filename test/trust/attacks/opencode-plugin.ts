// The OpenCode plugin in-process with a fake host client that records what it is asked to do:
// every prompt (the text a session's model receives) and every session it was asked about.
import { OpenCommsPlugin } from '../../../adapters/opencode/plugin.ts';

export interface FakeHost {
  prompts: Array<{ session: string; text: string }>;
  client: Parameters<typeof OpenCommsPlugin>[0]['client'];
}

type Client = Parameters<typeof OpenCommsPlugin>[0]['client'];

/** Every session is a root session, idle, and accepts prompts. */
export function fakeHost(): FakeHost {
  const prompts: FakeHost['prompts'] = [];
  const prompt: Client['session']['prompt'] = async ({ path, body }) => {
    prompts.push({ session: path.id, text: body.parts.map((p) => p.text).join('') });
    return {};
  };
  const client: Client = {
    session: {
      get: async ({ path }) => ({ data: { id: path.id } }),
      status: async () => ({ data: {} }),
      messages: async () => ({ data: [] }),
      promptAsync: prompt,
      prompt,
    },
  };
  return { prompts, client };
}

type Hooks = {
  tool: Record<string, { execute(args: Record<string, unknown>, ctx: { sessionID: string }): Promise<string> }>;
  event(e: { event: { type: string; properties?: Record<string, unknown> } }): Promise<void>;
  'experimental.chat.system.transform'(i: { sessionID?: string }, out: { system: string[] }): Promise<void>;
  'command.execute.before'(
    i: { command: string; sessionID: string; arguments: string },
    out: { parts: Array<Record<string, unknown>> },
  ): Promise<void>;
};

export interface OpenCode {
  host: FakeHost;
  hooks: Hooks;
  /** A tool call as session `sid`; the raw text the tool returned (what the model reads). */
  tool(sid: string, name: string, args: Record<string, unknown>): Promise<string>;
  call(sid: string, name: string, args: Record<string, unknown>): Promise<{ ok: boolean; message: string; data?: any }>;
  /** The system text OpenCode would add for `sid`. */
  system(sid: string): Promise<string>;
  /** `/OpenComms <args>` as `sid`: the text that goes to its model. */
  slash(sid: string, args: string): Promise<string>;
  idle(sid: string): Promise<void>;
}

export async function openCode(directory: string, projectId = 'proj'): Promise<OpenCode> {
  const host = fakeHost();
  const hooks = (await OpenCommsPlugin({
    client: host.client,
    project: { id: projectId },
    directory,
    worktree: directory,
  })) as unknown as Hooks;
  const tool = (sid: string, name: string, args: Record<string, unknown>) =>
    hooks.tool[name]!.execute(args, { sessionID: sid });
  return {
    host,
    hooks,
    tool,
    call: async (sid, name, args) => JSON.parse(await tool(sid, name, args)),
    async system(sid) {
      const out = { system: [] as string[] };
      await hooks['experimental.chat.system.transform']({ sessionID: sid }, out);
      return out.system.join('\n');
    },
    async slash(sid, args) {
      const out = { parts: [{ type: 'text', text: '' }] as Array<Record<string, unknown>> };
      await hooks['command.execute.before']({ command: 'OpenComms', sessionID: sid, arguments: args }, out);
      return String(out.parts[0]!.text);
    },
    idle: (sid) => hooks.event({ event: { type: 'session.idle', properties: { sessionID: sid } } }),
  };
}
