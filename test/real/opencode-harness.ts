// Helpers of the live OpenCode tests (`opencode.test.ts`, `bench-opencode.ts`): a project with the
// OpenComms plugin installed by the real installer, `opencode serve` inside a loopback-only
// namespace talking to a fake Chat Completions provider, a small HTTP client with a timeout on
// every call, and readers for `.opencomms/` (state.json and the per-channel history logs).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, bin, configureOpenCode, start, tail, waitHttp } from './env.ts';
import type { Proc, Sandbox } from './env.ts';
import type { FakeServer } from './fake/index.ts';
import { readStateSync } from '../helpers/state-files.ts';

export const ROLE_HEADER = '## OpenComms role instructions';
export const BEGIN = '<<<UNTRUSTED_PEER_MESSAGE>>>';
export const END = '<<<END_UNTRUSTED_PEER_MESSAGE>>>';

/** `opencomms install opencode --project <proj>` (the real installer: bundle + opencode.json entry). */
export function installPlugin(proj: string): string {
  const r = spawnSync(
    process.execPath,
    [join(REPO_ROOT, 'bin', 'opencomms.js'), 'install', 'opencode', '--project', proj],
    {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  if (r.status !== 0)
    throw new Error(
      `opencomms install opencode failed (exit ${r.status}): ${r.stderr || r.stdout || r.error?.message}`,
    );
  return r.stdout;
}

/** Writes opencode.json for `fake` (see configureOpenCode), then installs the plugin. Returns the env. */
export function setupProject(sb: Sandbox, fake: FakeServer): Record<string, string> {
  const env = configureOpenCode(sb, fake);
  installPlugin(sb.proj);
  const cfg = JSON.parse(readFileSync(join(sb.proj, 'opencode.json'), 'utf8'));
  if (!Array.isArray(cfg.plugin) || !cfg.plugin.includes('.opencode/plugins/opencomms.js')) {
    throw new Error(`installer did not register the plugin: ${JSON.stringify(cfg.plugin)}`);
  }
  return env;
}

/** The pid of the command `start()` runs inside the namespace (unshare execs netns-exec, whose child it is). */
export function innerPid(proc: Proc): number | undefined {
  const outer = proc.child.pid;
  if (!outer) return undefined;
  try {
    const kids = readFileSync(`/proc/${outer}/task/${outer}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    return kids[0];
  } catch {
    return undefined;
  }
}

export interface OcServer {
  name: string;
  base: string;
  proc: Proc;
  api: OcApi;
  /** The opencode process id (the plugin's `in_flight_by` / `owner` tag starts with it). */
  pid: number;
  stop(): Promise<void>;
  /** SIGKILL of the opencode process only (no clean shutdown), then of its wrapper group. */
  kill9(): Promise<void>;
}

const PORT = 4096;

/**
 * `opencode serve` in `sb.proj` inside its own namespace; the fakes' ports are forwarded. Waits for
 * `/global/health` (never a request during the start-up race), then for the plugin to have loaded.
 */
export async function startServe(
  sb: Sandbox,
  env: Record<string, string>,
  fakes: FakeServer[],
  name = 'serve',
  opts: { timeoutMs?: number; args?: string[] } = {},
): Promise<OcServer> {
  const timeoutMs = opts.timeoutMs ?? 240_000;
  const args = [
    'serve',
    '--port',
    String(PORT),
    '--hostname',
    '127.0.0.1',
    '--print-logs',
    '--log-level',
    'INFO',
    ...(opts.args ?? []),
  ];
  const proc = await start(bin('opencode'), args, {
    cwd: sb.proj,
    env,
    timeoutMs,
    forward: fakes.map((f) => f.port),
    expose: [PORT],
  });
  const base = `http://127.0.0.1:${proc.ports.get(PORT)}`;
  try {
    await waitHttp(`${base}/global/health`, 30_000);
  } catch (e) {
    await proc.stop();
    throw new Error(`${name}: ${(e as Error).message}\n${tail(proc.stderr())}`);
  }
  let pid: number | undefined;
  for (let i = 0; i < 50 && !pid; i++) {
    pid = innerPid(proc);
    if (!pid) await sleep(20);
  }
  if (!pid) throw new Error(`${name}: cannot find the opencode pid`);
  const api = new OcApi(base, name);
  return {
    name,
    base,
    proc,
    api,
    pid,
    async stop() {
      await proc.stop(3000);
    },
    async kill9() {
      try {
        process.kill(pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await proc.stop(500);
    },
  };
}

/** Removes OpenCode's start-up locks left by a killed server (they make the next start spin). */
export function clearOpenCodeLocks(sb: Sandbox): string[] {
  const dir = join(sb.env.XDG_STATE_HOME, 'opencode', 'locks');
  if (!existsSync(dir)) return [];
  const gone = readdirSync(dir);
  for (const l of gone) rmSync(join(dir, l), { recursive: true, force: true });
  return gone;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value; throws with `what` (and `info()`) on timeout. */
export async function until<T>(
  fn: () => T | Promise<T>,
  what: string,
  timeoutMs = 30_000,
  info?: () => string,
  intervalMs = 50,
): Promise<NonNullable<T>> {
  const end = performance.now() + timeoutMs;
  let last: unknown;
  while (performance.now() < end) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    await sleep(intervalMs);
  }
  throw new Error(
    `timeout ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}${info ? `\n${info()}` : ''}`,
  );
}

export interface OcMessage {
  info: { id: string; role: 'user' | 'assistant'; time: { created: number; completed?: number }; error?: unknown };
  parts: Array<{ type: string; text?: string; tool?: string; state?: any; synthetic?: boolean }>;
}

/** The v1 HTTP routes the tests use; every call has a timeout. */
export class OcApi {
  constructor(
    readonly base: string,
    readonly name = 'serve',
  ) {}

  async call(method: string, path: string, body?: unknown, timeoutMs = 30_000): Promise<{ status: number; data: any }> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let data: any = text;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      // not JSON
    }
    return { status: res.status, data };
  }

  private async ok(method: string, path: string, body?: unknown, timeoutMs?: number): Promise<any> {
    const r = await this.call(method, path, body, timeoutMs);
    if (r.status < 200 || r.status >= 300)
      throw new Error(`${this.name} ${method} ${path}: HTTP ${r.status} ${JSON.stringify(r.data).slice(0, 500)}`);
    return r.data;
  }

  createSession(title: string): Promise<{ id: string; parentID?: string }> {
    return this.ok('POST', '/session', { title });
  }

  getSession(id: string) {
    return this.call('GET', `/session/${id}`);
  }

  deleteSession(id: string) {
    return this.call('DELETE', `/session/${id}`);
  }

  listSessions(): Promise<Array<{ id: string; title: string; parentID?: string }>> {
    return this.ok('GET', '/session');
  }

  /** A prompt that waits for the whole turn (the assistant's last message). */
  prompt(id: string, text: string, timeoutMs = 60_000): Promise<OcMessage> {
    return this.ok('POST', `/session/${id}/message`, { parts: [{ type: 'text', text }] }, timeoutMs);
  }

  /** Starts a turn and returns at once (204). */
  async promptAsync(id: string, text: string): Promise<void> {
    await this.ok('POST', `/session/${id}/prompt_async`, { parts: [{ type: 'text', text }] });
  }

  messages(id: string): Promise<OcMessage[]> {
    return this.ok('GET', `/session/${id}/message`);
  }

  /** `{[id]: {type}}` for busy/retry sessions only. */
  status(): Promise<Record<string, { type: string }>> {
    return this.ok('GET', '/session/status');
  }

  /** Waits until the session's last message is a completed assistant message and it is not busy. */
  async idle(id: string, timeoutMs = 60_000): Promise<OcMessage[]> {
    return until(
      async () => {
        const st = await this.status();
        if (st[id]) return null;
        const msgs = await this.messages(id);
        const last = msgs.at(-1);
        return last && last.info.role === 'assistant' && last.info.time.completed ? msgs : null;
      },
      `${this.name} session ${id} idle`,
      timeoutMs,
    );
  }
}

/** Texts of a message's text parts. */
export const textOf = (m: OcMessage): string =>
  m.parts
    .filter((p) => p.type === 'text')
    .map((p) => p.text ?? '')
    .join('');

/** The tool parts of a session's messages: `{tool, input, output, status, start, end}`. */
export function toolCalls(
  msgs: OcMessage[],
): Array<{ tool: string; input: any; output: string; status: string; start: number; end: number }> {
  return msgs.flatMap((m) =>
    m.parts
      .filter((p) => p.type === 'tool')
      .map((p) => ({
        tool: p.tool!,
        input: p.state?.input,
        output: p.state?.output,
        status: p.state?.status,
        start: p.state?.time?.start,
        end: p.state?.time?.end,
      })),
  );
}

/** The OpenComms ToolResult a tool call returned. */
export const result = (c: { output: string }): { ok: boolean; message: string; data?: any } => JSON.parse(c.output);

/** The state as any process loads it: state.json and the journal it names. */
export function readState(proj: string): any {
  return existsSync(join(proj, '.opencomms', 'state.json')) ? readStateSync(proj) : null;
}

/** Every envelope of the project's history logs (terminal envelopes leave state.json for them). */
export function readHistory(proj: string): any[] {
  const dir = join(proj, '.opencomms', 'history');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l)),
    );
}

/** All envelopes, live (state.json) and logged (history), latest version of each id. */
export function allEnvelopes(proj: string): Map<string, any> {
  const out = new Map<string, any>();
  for (const e of readHistory(proj)) out.set(e.message_id, e);
  for (const e of Object.values(readState(proj)?.messages ?? {}) as any[]) out.set(e.message_id, e);
  return out;
}

/** The framed message ids (`id: ocm_…`) in a text. */
export const framedIds = (t: string): string[] =>
  [...t.matchAll(/\[OpenComms\] from [^\n]*\| id: (ocm_[0-9a-f]+)/g)].map((m) => m[1]);
