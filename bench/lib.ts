// Benchmark helpers: percentiles, one JSON line per figure (each beside its target), throw-away
// projects, MCP servers driven by the SDK client, and bundling a server the way ours is built.
import { spawn } from 'node:child_process';
import { access, mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { build } from 'esbuild';
import { MCP_NODE_FLAGS } from '../adapters/install/member-env.ts';
import { routeLimit } from '../adapters/route-limits.ts';
import type { Caller } from '../src/engine/index.ts';
import type { Runtime } from '../src/runtime/runtime.ts';

export const ROOT = join(import.meta.dirname, '..');

/** Node flags of our MCP server: the installers' (`MCP_NODE_FLAGS`), or `BENCH_MCP_NODE_FLAGS`
 *  (space-separated) to compare another set on the same machine. */
export const mcpNodeFlags: readonly string[] =
  process.env.BENCH_MCP_NODE_FLAGS?.split(' ').filter(Boolean) ?? MCP_NODE_FLAGS;

export function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return {
    p50: r(at(0.5)),
    p95: r(at(0.95)),
    p99: r(at(0.99)),
    max: r(s.at(-1) ?? 0),
    mean: r(s.reduce((a, b) => a + b, 0) / (s.length || 1)),
    n: s.length,
  };
}

/** A bench child's start line: it returns once the parent creates `barrier`, so every child starts
 *  sending at the same moment, after all have started up. */
export async function waitForBarrier(barrier: string) {
  for (;;) {
    try {
      return await access(barrier);
    } catch {
      await new Promise((r) => setTimeout(r, 1));
    }
  }
}

/** Warm-up channels per bench worker (worker.ts): 1000 sends a minute each. */
export const WARM_CHANNELS = 4;

export const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

export function emit(figure: string, fields: Record<string, unknown>) {
  process.stdout.write(`${JSON.stringify({ figure, ...fields })}\n`);
}

/** A ratio figure: the value, the floor it is divided by (measured in the same run), the target. */
export function emitRatio(
  figure: string,
  value: number,
  floor: number,
  target: string,
  extra: Record<string, unknown> = {},
) {
  emit(figure, { ratio: round(value / floor), value: round(value, 3), floor: round(floor, 3), target, ...extra });
}

export async function withProject<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'oc-bench-'));
  try {
    return await fn(dir);
  } finally {
    // Retried: a server closed a moment ago may still be removing its lock token as it exits.
    await rm(dir, { recursive: true, force: true, maxRetries: 5 });
  }
}

export const caller = (dir: string, session_id: string, delivery_mode = 'pull'): Caller => ({
  session_id,
  host: 'bench',
  surface: 'cli',
  delivery_mode,
  host_session_id: session_id,
  project_id: 'local-project',
  worktree: dir,
});

/** Channels `bench-0..k-1`, each with sender `a` and pull reader `r`: rotating over them keeps
 *  every channel under its 1000-per-minute rate limit. */
export async function setupChannels(rt: Runtime, dir: string, k: number, sender = 'a', reader = 'r') {
  for (let i = 0; i < k; i++) {
    const c = await rt.run({
      op: 'create',
      caller: caller(dir, sender, 'push'),
      args: { channel: `bench-${i}`, role: 'A', role_prompt: 'send', rate_limit: 1000 },
    });
    const j = await rt.run({
      op: 'join',
      caller: caller(dir, reader, 'pull'),
      args: { channel: `bench-${i}`, role: 'R', role_prompt: 'read' },
    });
    if (!c.ok || !j.ok) throw new Error(`setup failed: ${c.message} / ${j.message}`);
  }
}

export const now = () => performance.now();

/** The most N writers together can reach over one on this machine at the CPU per send one
 *  writer pays: it kept `oneCores` busy, and N can keep at most every core busy. */
export const ceiling = (oneCores: number) => round(availableParallelism() / oneCores);

/** The host the bench's reader runs in: the measured host whose MCP tool result is the largest
 *  (adapters/route-limits.ts), so a read of 100 takes as few answers as any host allows. */
export const READER_HOST = 'claude-code';
/** What one answer of a read may hold (shownSize units): the reader's host's tool result. */
export const READ_ANSWER_LIMIT = routeLimit(READER_HOST, 'tool_result');

/** 200 characters, like an agent's short message. */
export const message = (i: number) => `message ${i} `.padEnd(200, '.');

export interface Mcp {
  call(name: string, args: Record<string, unknown>): Promise<{ ok: boolean; message: string; data?: any }>;
  pid: number;
  close(): Promise<void>;
}

/** An SDK client over real stdio pipes to `node <args>`. */
export async function connectMcp(args: string[], env: Record<string, string> = {}): Promise<Mcp> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    env: { ...(process.env as Record<string, string>), ...env },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'opencomms-bench', version: '0.0.0' });
  await client.connect(transport);
  return {
    pid: transport.pid!,
    async call(name, a) {
      const r = (await client.callTool({ name, arguments: a })) as { content: Array<{ text: string }> };
      return JSON.parse(r.content[0]!.text);
    },
    close: () => client.close(),
  };
}

/** Bundles a TypeScript entry into one ES module, as scripts/build.ts bundles the MCP server. */
export async function bundle(entry: string, outfile: string) {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    minify: true,
    logLevel: 'warning',
    banner: {
      js: "import { createRequire as __ocRequire } from 'node:module'; const require = __ocRequire(import.meta.url);",
    },
  });
}

/** Wall time from spawning `node <args>` to the answer of tools/list (after initialize). */
export function spawnToToolsList(args: string[], env: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = now();
    const p = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'ignore'], env: { ...process.env, ...env } });
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'bench', version: '0' } },
    };
    p.stdin.write(
      `${JSON.stringify(init)}\n${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' })}\n`,
    );
    let out = '';
    p.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('"id":2')) {
        resolve(now() - t);
        p.kill();
      }
    });
    p.on('error', reject);
    p.on('exit', (code) => {
      if (!out.includes('"id":2')) reject(new Error(`server exited (${code}) before tools/list`));
    });
  });
}
