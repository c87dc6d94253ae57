// Benchmark helpers: percentiles, one JSON line per figure, throw-away projects.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Caller } from '../src/engine/index.ts';
import type { Runtime } from '../src/runtime/runtime.ts';

export function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return { p50: r(at(0.5)), p95: r(at(0.95)), p99: r(at(0.99)), n: s.length };
}

export function emit(figure: string, fields: Record<string, unknown>) {
  process.stdout.write(`${JSON.stringify({ figure, ...fields })}\n`);
}

export async function withProject<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'oc-bench-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export const caller = (dir: string, session_id: string, delivery_mode = 'pull'): Caller => ({
  session_id, host: 'bench', surface: 'cli', delivery_mode, host_session_id: session_id, project_id: 'local-project', worktree: dir,
});

/** Channels `bench-0..k-1`, each with sender `a` and pull reader `r`: rotating over them keeps
 *  every channel under its 1000-per-minute rate limit. */
export async function setupChannels(rt: Runtime, dir: string, k: number, sender = 'a', reader = 'r') {
  for (let i = 0; i < k; i++) {
    const c = await rt.run({ op: 'create', caller: caller(dir, sender, 'push'), args: { channel: `bench-${i}`, role: 'A', role_prompt: 'send', rate_limit: 1000 } });
    const j = await rt.run({ op: 'join', caller: caller(dir, reader, 'pull'), args: { channel: `bench-${i}`, role: 'R', role_prompt: 'read' } });
    if (!c.ok || !j.ok) throw new Error(`setup failed: ${c.message} / ${j.message}`);
  }
}

export const now = () => performance.now();
