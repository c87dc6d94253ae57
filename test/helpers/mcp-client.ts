// An SDK client connected to `opencomms mcp` over real stdio pipes, for tests and benchmarks.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');

export interface McpHandle {
  client: Client;
  call(name: string, args?: Record<string, unknown>): Promise<{ ok: boolean; message: string; data?: any }>;
  raw(name: string, args?: Record<string, unknown>): Promise<unknown>;
  close(): Promise<void>;
  stderr: string[];
}

export async function startMcp(project: string, opts: { pin?: string; admin?: boolean; host?: string; env?: Record<string, string> } = {}): Promise<McpHandle> {
  const args = [join(root, 'bin', 'opencomms.js'), 'mcp', '--project', project];
  if (opts.admin) args.push('--admin');
  if (opts.host) args.push('--host', opts.host);
  const env: Record<string, string> = { ...(process.env as Record<string, string>), ...opts.env };
  if (opts.pin !== undefined) env.OPENCOMMS_MEMBER_ID = opts.pin;
  else delete env.OPENCOMMS_MEMBER_ID;
  const transport = new StdioClientTransport({ command: process.execPath, args, env, stderr: 'pipe' });
  const stderr: string[] = [];
  transport.stderr?.on('data', (d: Buffer) => stderr.push(d.toString()));
  const client = new Client({ name: 'opencomms-test', version: '0.0.0' });
  await client.connect(transport);
  const raw = (name: string, a: Record<string, unknown> = {}) => client.callTool({ name, arguments: a });
  return {
    client,
    stderr,
    raw,
    async call(name, a = {}) {
      const r = (await raw(name, a)) as { content: Array<{ type: string; text: string }>; isError?: boolean };
      const parsed = JSON.parse(r.content[0]!.text);
      if (Boolean(r.isError) !== !parsed.ok) throw new Error(`isError ${r.isError} disagrees with ok ${parsed.ok}`);
      return parsed;
    },
    close: () => client.close(),
  };
}
