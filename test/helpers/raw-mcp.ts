// `opencomms mcp` driven byte by byte over real stdio pipes: frames in (any bytes, any chunking),
// every stdout line parsed out. For fuzzing and attacks, where an SDK client would refuse to send
// what we want to send.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'opencomms.js');

export interface RawMcp {
  child: ChildProcessWithoutNullStreams;
  /** Every stdout line that parsed as JSON, in order. */
  lines: any[];
  /** Stdout lines that were not JSON (the wire must never carry one). */
  badLines: string[];
  stderr(): string;
  /** Writes bytes as they are (no newline added), waiting out backpressure. */
  write(bytes: Buffer | string): Promise<void>;
  /** The response to request `id` (string ids compare exactly). */
  response(id: string | number, ms?: number): Promise<any>;
  exited: Promise<number | null>;
}

export function spawnRawMcp(project: string, pin: string | null, extraArgs: string[] = []): RawMcp {
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  delete env.OPENCOMMS_MEMBER_ID;
  if (pin !== null) env.OPENCOMMS_MEMBER_ID = pin;
  const child = spawn(process.execPath, [BIN, 'mcp', '--project', project, ...extraArgs], { env, stdio: 'pipe' });
  const lines: any[] = [];
  const byId = new Map<string | number, any>();
  const badLines: string[] = [];
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString('utf8');
    for (let i = out.indexOf('\n'); i >= 0; i = out.indexOf('\n')) {
      const line = out.slice(0, i);
      out = out.slice(i + 1);
      try {
        const m = JSON.parse(line);
        lines.push(m);
        if (m && typeof m === 'object' && (typeof m.id === 'string' || typeof m.id === 'number')) byId.set(m.id, m);
      } catch {
        badLines.push(line);
      }
    }
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
  child.stdin.on('error', () => {}); // the server may be gone; `exited` says so
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    lines,
    badLines,
    stderr: () => err,
    write: (bytes) =>
      new Promise<void>((resolve, reject) => {
        if (child.stdin.write(bytes, (e) => e && reject(e))) resolve();
        else child.stdin.once('drain', () => resolve());
      }),
    async response(id, ms = 30_000) {
      const until = performance.now() + ms;
      while (!byId.has(id)) {
        if (performance.now() > until || child.exitCode !== null)
          throw new Error(`no response to ${JSON.stringify(id)} (exit ${child.exitCode}); stderr: ${err.slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      return byId.get(id);
    },
    exited,
  };
}

/** The MCP handshake, so later frames reach the tool handlers. */
export async function initialize(s: RawMcp): Promise<void> {
  await s.write(
    `${JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } })}\n` +
      `${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`,
  );
  await s.response('init');
}
