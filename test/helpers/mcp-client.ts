// Clients of `opencomms mcp` over real stdio pipes, for tests and benchmarks: an SDK client
// (`startMcp`) and a hand-driven raw line client (`spawnRaw`). No vitest here: benchmarks use it too.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');
const BIN = join(root, 'bin', 'opencomms.js');

/** How one server is started: its pin (absent = unset), flags and extra environment. */
export interface ServerOptions {
  pin?: string;
  admin?: boolean;
  host?: string;
  env?: Record<string, string>;
}

/** The child's environment: ours minus any inherited pin, plus the options. */
function serverEnv(opts: ServerOptions): Record<string, string> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>), ...opts.env };
  if (opts.pin !== undefined) env.OPENCOMMS_MEMBER_ID = opts.pin;
  else delete env.OPENCOMMS_MEMBER_ID;
  return env;
}

function serverArgs(project: string, opts: ServerOptions): string[] {
  const args = [BIN, 'mcp', '--project', project];
  if (opts.admin) args.push('--admin');
  if (opts.host) args.push('--host', opts.host);
  return args;
}

export type Result = { ok: boolean; message: string; data?: any };

export interface McpHandle {
  client: Client;
  call(name: string, args?: Record<string, unknown>): Promise<Result>;
  raw(name: string, args?: Record<string, unknown>): Promise<unknown>;
  close(): Promise<void>;
  stderr: string[];
}

export async function startMcp(project: string, opts: ServerOptions = {}): Promise<McpHandle> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: serverArgs(project, opts),
    env: serverEnv(opts),
    stderr: 'pipe',
  });
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

// ---- a server driven by hand -----------------------------------------------------------------------

export interface RawServer {
  child: ChildProcessWithoutNullStreams;
  /** Every stdout line, parsed (`badLines` holds any that were not JSON). */
  lines: any[];
  badLines: string[];
  stderr: () => string;
  write(line: string | object): void;
  /** The next unclaimed output line matching `pred`. */
  take(pred: (m: any) => boolean, ms?: number): Promise<any>;
  /** Ends stdin (the client went away) and resolves with the exit code. */
  end(): Promise<number | null>;
  exited: Promise<number | null>;
}

export function spawnRaw(project: string, opts: ServerOptions = {}): RawServer {
  const child = spawn(process.execPath, serverArgs(project, opts), { env: serverEnv(opts), stdio: 'pipe' });
  const lines: any[] = [];
  const unclaimed: any[] = [];
  const badLines: string[] = [];
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString('utf8');
    let i: number;
    while ((i = out.indexOf('\n')) >= 0) {
      const line = out.slice(0, i);
      out = out.slice(i + 1);
      try {
        const m = JSON.parse(line);
        lines.push(m);
        unclaimed.push(m);
      } catch {
        badLines.push(line);
      }
    }
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
  // 'close', not 'exit': by then stdout and stderr have been read to their end.
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  return {
    child,
    lines,
    badLines,
    stderr: () => err,
    write: (line) => void child.stdin.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`),
    async take(pred, ms = 15_000) {
      const until = performance.now() + ms;
      for (;;) {
        const i = unclaimed.findIndex(pred);
        if (i >= 0) return unclaimed.splice(i, 1)[0];
        if (performance.now() > until)
          throw new Error(`no matching output line; got ${JSON.stringify(unclaimed).slice(0, 500)}; stderr ${err}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    end() {
      child.stdin.end();
      return exited;
    },
    exited,
  };
}

/** An `initialize` request as a client would send it. */
export const initialize = (id: number, protocolVersion: string) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw-test', version: '0.0.0' } },
});
