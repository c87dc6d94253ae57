// Helpers of the live Claude Code / Codex tests: a project with OpenComms installed by the real CLI
// (`opencomms install` + `install-member`), a peer on the project's MCP server (SDK client), a fake
// model that answers every framed OpenComms message with an `opencomms_send` acknowledgement, and
// readers for the wake waiters' registrations.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { startMcp, type McpHandle } from '../helpers/mcp-client.ts';
import { REPO_ROOT, run, describeRun, type Sandbox } from './env.ts';
import type { ModelRequest } from './fake/index.ts';

export const OPENCOMMS = join(REPO_ROOT, 'bin', 'opencomms.js');

/** `opencomms <args> --project <proj>` (the real CLI, host network: it talks to nothing). */
export async function opencomms(sb: Sandbox, ...args: string[]) {
  const r = await run(process.execPath, [OPENCOMMS, ...args, '--project', sb.proj], { cwd: sb.proj, env: sb.env, timeoutMs: 60_000, hostNetwork: true });
  expect(r.code, describeRun(r)).toBe(0);
  return r.stdout;
}

/** The ids of the OpenComms frames in a text (`| id: ocm_… |` headers). */
export const frameIds = (text: string) => [...text.matchAll(/\| id: (ocm_[0-9a-f]{32}) \|/g)].map((m) => m[1]!);

/** Text of the newest user message of an Anthropic request (a wake, a hook block, a prompt). */
export function newestUserText(req: ModelRequest): string {
  const msgs: any[] = Array.isArray(req.body.messages) ? req.body.messages : [];
  const last = [...msgs].reverse().find((m) => m.role === 'user');
  if (!last) return '';
  return typeof last.content === 'string' ? last.content : (last.content as any[]).filter((b) => b.type === 'text').map((b) => b.text).join('\n');
}

/** A fake-model line that acknowledges every framed message of the newest user message through
 *  the member's own MCP tool, joins when asked, and closes a turn after a tool result. */
export const acknowledge = (channel: string, join?: Record<string, unknown>) => (req: ModelRequest): string => {
  if (req.endsWithToolResult) return 'SAY done';
  const text = newestUserText(req);
  const ids = frameIds(text);
  if (ids.length) return `CALL mcp__opencomms__opencomms_send ${JSON.stringify({ channel, content: `ack ${ids.join(' ')}` })}`;
  if (join && text.includes('[join]')) return `CALL mcp__opencomms__opencomms_join ${JSON.stringify({ channel, ...join })}`;
  return 'SAY ok';
};

export interface Peer extends McpHandle {
  send(content: string): Promise<{ id: string; at: number }>;
  /** Contents of everything pulled so far. */
  received: string[];
  pullUntil(pattern: RegExp, ms: number): Promise<string>;
}

/** A pinned member on the project's MCP server, in this process's network (it reaches nothing). */
export async function startPeer(sb: Sandbox, pin: string, channel: string, env: Record<string, string> = {}): Promise<Peer> {
  const h = await startMcp(sb.proj, { pin, host: 'sdk', env: { ...sb.env, ...env } });
  const received: string[] = [];
  return Object.assign(h, {
    received,
    async send(content: string) {
      const r = await h.call('opencomms_send', { channel, content });
      expect(r.ok, r.message).toBe(true);
      return { id: r.data.message_ids[0] as string, at: Date.now() };
    },
    async pullUntil(pattern: RegExp, ms: number) {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        const r = await h.call('opencomms_pull', {});
        for (const m of r.data?.messages ?? []) received.push(m.framed as string);
        const hit = received.find((t) => pattern.test(t));
        if (hit) return hit;
        await new Promise((res) => setTimeout(res, 100));
      }
      throw new Error(`peer: nothing matching ${pattern} within ${ms} ms (got ${received.length})`);
    },
  });
}

/** The wake waiters registered in this sandbox: `wake-<claude pid>.pid` holding the waiter's pid. */
export function waiters(sb: Sandbox): Array<{ claude: number; waiter: number }> {
  const out: Array<{ claude: number; waiter: number }> = [];
  for (const d of existsSync(sb.tmp) ? readdirSync(sb.tmp).filter((n) => n.startsWith('opencomms-')) : []) {
    for (const f of readdirSync(join(sb.tmp, d))) {
      const m = /^wake-(\d+)\.pid$/.exec(f);
      if (!m) continue;
      try {
        out.push({ claude: Number(m[1]), waiter: Number(readFileSync(join(sb.tmp, d, f), 'utf8')) });
      } catch {
        // replaced while reading
      }
    }
  }
  return out;
}

export const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/** Processes whose command line names this sandbox's hook runner. */
export function hookProcesses(sb: Sandbox): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
      if (cmd.includes(sb.proj) && cmd.includes('claude-code-hooks')) out.push(Number(p));
    } catch {
      // gone
    }
  }
  return out;
}

export async function until<T>(what: string, f: () => T | undefined | false | Promise<T | undefined | false>, ms: number, info: () => string = () => ''): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timeout ${ms} ms: ${what}\n${info()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
