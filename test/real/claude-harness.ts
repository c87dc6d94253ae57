// Helpers of the live Claude Code / Codex tests: a project with OpenComms installed by the real CLI
// (`opencomms install` + `install-member`), a peer on the project's MCP server (SDK client), a fake
// model that answers every framed OpenComms message with an `opencomms_send` acknowledgement, and
// readers for the wake waiters' registrations.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { startMcp, type McpHandle } from '../helpers/mcp-client.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import {
  REAL_DIR,
  REPO_ROOT,
  bin,
  claudeArgs,
  codexArgs,
  configureClaude,
  configureCodex,
  describeRun,
  jsonLines,
  namespaced,
  run,
  trustClaudeProject,
  trustCodexProject,
  type Sandbox,
} from './env.ts';
import { startFakeAnthropic, startFakeResponses } from './fake/index.ts';
import type { FakeServer, ModelRequest } from './fake/index.ts';
import { startTerminal } from './tmux.ts';

export const OPENCOMMS = join(REPO_ROOT, 'bin', 'opencomms.js');

/** `opencomms <args> --project <proj>` (the real CLI, host network: it talks to nothing). */
export async function opencomms(sb: Sandbox, ...args: string[]) {
  const r = await run(process.execPath, [OPENCOMMS, ...args, '--project', sb.proj], {
    cwd: sb.proj,
    env: sb.env,
    timeoutMs: 60_000,
    hostNetwork: true,
  });
  expect(r.code, describeRun(r)).toBe(0);
  return r.stdout;
}

type Runtime = ReturnType<typeof openRuntime>;

/** The peer creates channel `team` as its Lead (a rate limit high enough for a burst). */
export async function leadTeam(peer: Peer) {
  const created = await peer.call('opencomms_create', {
    channel: 'team',
    role: 'Lead',
    role_prompt: 'You lead.',
    rate_limit: 200,
  });
  expect(created.ok, JSON.stringify(created)).toBe(true);
}

/** `member` joins `team` as its MCP server would: host `host`, not yet bound to a host session. */
export async function joinTeam(
  rt: Runtime,
  sb: Sandbox,
  member: string,
  host: string,
  role: { role: string; role_prompt: string },
  delivery_mode: 'pull' | 'spawn_push' = 'pull',
) {
  const joined = await rt.run({
    op: 'join',
    caller: {
      session_id: member,
      host,
      surface: 'mcp',
      delivery_mode,
      host_session_id: null,
      project_id: 'local-project',
      worktree: sb.proj,
    },
    args: { channel: 'team', ...role },
  });
  expect(joined.ok, joined.message).toBe(true);
}

/** The ids of the OpenComms frames in a text (`| id: ocm_… |` headers). */
export const frameIds = (text: string) => [...text.matchAll(/\| id: (ocm_[0-9a-f]{32}) \|/g)].map((m) => m[1]!);

/** Every frame id the model reads in an Anthropic request, in the order it reads them: every user
 *  text of the conversation, including what Claude Code appends inside a tool result (a wake it
 *  held during the turn arrives there), each occurrence (a frame rendered twice counts twice). */
export function framesRead(req: ModelRequest): string[] {
  const texts = (c: unknown): string[] =>
    typeof c === 'string'
      ? [c]
      : Array.isArray(c)
        ? c.flatMap((b: any) =>
            b.type === 'text' ? [String(b.text)] : b.type === 'tool_result' ? texts(b.content) : [],
          )
        : [];
  const msgs: any[] = Array.isArray(req.body.messages) ? req.body.messages : [];
  return msgs
    .filter((m) => m.role === 'user')
    .flatMap((m) => texts(m.content))
    .flatMap(frameIds);
}

/** Text of the newest user message of an Anthropic request (a wake, a hook block, a prompt). */
export function newestUserText(req: ModelRequest): string {
  const msgs: any[] = Array.isArray(req.body.messages) ? req.body.messages : [];
  const last = [...msgs].reverse().find((m) => m.role === 'user');
  if (!last) return '';
  return typeof last.content === 'string'
    ? last.content
    : (last.content as any[])
        .filter((b) => b.type === 'text')
        .map((b) => b.text)
        .join('\n');
}

/** A fake-model line that acknowledges every framed message of the newest user message through
 *  the member's own MCP tool, joins when asked, and closes a turn after a tool result. */
export const acknowledge =
  (channel: string, join?: Record<string, unknown>, to?: string) =>
  (req: ModelRequest): string => {
    if (req.endsWithToolResult) return 'SAY done';
    const text = newestUserText(req);
    const ids = frameIds(text);
    if (ids.length)
      return `CALL mcp__opencomms__opencomms_send ${JSON.stringify({ channel, content: `ack ${ids.join(' ')}`, ...(to ? { to } : {}) })}`;
    if (join && text.includes('[join]'))
      return `CALL mcp__opencomms__opencomms_join ${JSON.stringify({ channel, ...join })}`;
    return 'SAY ok';
  };

export interface Peer extends McpHandle {
  send(content: string): Promise<{ id: string; at: number }>;
  /** Contents of everything pulled so far. */
  received: string[];
  pullUntil(pattern: RegExp, ms: number): Promise<string>;
}

/** A pinned member on the project's MCP server, in this process's network (it reaches nothing). */
export async function startPeer(
  sb: Sandbox,
  pin: string,
  channel: string,
  env: Record<string, string> = {},
): Promise<Peer> {
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
      const end = performance.now() + ms;
      while (performance.now() < end) {
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

export async function until<T>(
  what: string,
  f: () => T | undefined | false | Promise<T | undefined | false>,
  ms: number,
  info: () => string = () => '',
): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (performance.now() > end) throw new Error(`timeout ${ms} ms: ${what}\n${info()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export type Defer = <T>(value: T, close: (v: T) => unknown) => T;
const newPin = () => `sess_${randomBytes(12).toString('hex')}`;

/** An idle interactive Claude Code (tmux) with OpenComms installed and its member joined to "team"
 *  (one keystroke: the model joins through its own MCP server), and a peer to send from. */
export async function wakeRig(
  sb: Sandbox,
  defer: Defer,
  fakeTurns = 60,
  line?: (ack: (req: ModelRequest) => string) => (req: ModelRequest) => string,
) {
  const ack = acknowledge('team', { role: 'Builder', role_prompt: 'You build and acknowledge every message.' });
  const fake = defer(await startFakeAnthropic(Array.from({ length: fakeTurns }, () => (line ? line(ack) : ack))), (f) =>
    f.close(),
  );
  const member = newPin();
  await opencomms(sb, 'install', 'claude-code');
  await opencomms(sb, 'install-member', '--id', member);
  const hookLog = join(sb.root, 'hooks.log');
  const env = { ...configureClaude(sb, fake), OPENCOMMS_HOOK_LOG: hookLog };
  trustClaudeProject(sb, env, ['opencomms']);
  const peer = defer(await startPeer(sb, newPin(), 'team'), (p) => p.close());
  // A rate above the default 20 sends a minute: the figures script sends (and acknowledges) 40+.
  await leadTeam(peer);
  const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
  const row = async () => (await rt.read()).channels.team?.members.find((m) => m.session_id === member);
  const term = defer(
    await startTerminal(bin('claude'), ['--model', 'claude-sonnet-4-5'], {
      cwd: sb.proj,
      env,
      timeoutMs: 600_000,
      forward: [fake.port],
    }),
    (t) => t.close(),
  );
  let mail = '';
  const info = () =>
    `mail: ${mail}\nhooks.log:\n${existsSync(hookLog) ? readFileSync(hookLog, 'utf8') : ''}\nfake turns:\n${fake
      .turns()
      .map((r) => `${r.at} ${JSON.stringify(newestUserText(r).slice(-160))} -> ${JSON.stringify(r.reply)}`)
      .join('\n')}\nwaiters ${JSON.stringify(waiters(sb))}\nscreen:\n${term.screen()}`;
  await term.waitScreen(/❯/, 40_000);
  term.type('[join] join the team channel');
  const joined = await until(
    'Claude joined and its session bound',
    async () => (await row())?.host_session_id ?? false,
    30_000,
    info,
  );
  let lastWaiter = 0;
  return {
    fake,
    peer,
    rt,
    term,
    row,
    info,
    joined,
    member,
    /** Resolves with the waiter once one other than the last seen is registered and alive, and the
     *  turn's other hooks have exited: Claude Code runs its Stop hooks side by side, and mail sent
     *  while the synchronous one still starts up is (rightly) handed over by it, not by a wake. */
    armed: (what: string) =>
      until(
        `a new waiter is armed (${what})`,
        () => {
          const w = waiters(sb).find((x) => x.waiter !== lastWaiter && alive(x.waiter));
          if (!w || hookProcesses(sb).some((p) => p !== w.waiter)) return false;
          lastWaiter = w.waiter;
          return w;
        },
        20_000,
        info,
      ),
    /** A peer send; resolves when the fake model got it (no keystroke) and the ack reached the peer. */
    async wake(label: string) {
      const { id, at } = await peer.send(`${label}: please acknowledge`);
      const req = await until(
        `the fake model receives ${label} with no keystroke`,
        async () => {
          mail = JSON.stringify(
            Object.values((await rt.read()).messages).map((e) => [
              e.message_id.slice(0, 12),
              e.delivery_status,
              e.in_flight_by,
            ]),
          );
          return fake.turns().find((r) => frameIds(newestUserText(r)).includes(id));
        },
        15_000,
        info,
      );
      expect(newestUserText(req)).toContain(
        `<<<UNTRUSTED_PEER_MESSAGE>>>\n${label}: please acknowledge\n<<<END_UNTRUSTED_PEER_MESSAGE>>>`,
      );
      expect(newestUserText(req)).toContain('OpenComms delivered new mail from your channel peers:');
      await peer.pullUntil(new RegExp(`ack ${id}`), 15_000);
      return { id, at, req, ms: req.at - at };
    },
  };
}

const WRAP = join(REAL_DIR, 'fixtures', 'netns-wrap.mjs');

/** A spawn_push member of `host` bound to a session made by an earlier real run of the client, and
 *  a peer whose own `opencomms mcp` spawns the client offline (netns-wrap.mjs via the template). */
export async function spawnRig(
  sb: Sandbox,
  defer: Defer,
  host: 'claude-code' | 'codex',
  turns: number,
  o: { hooks?: boolean } = {},
) {
  const claude = host === 'claude-code';
  const fake: FakeServer = defer(
    claude
      ? await startFakeAnthropic(Array(turns).fill('SAY ok'))
      : await startFakeResponses(Array(turns).fill('SAY ok')),
    (f) => f.close(),
  );
  const env = claude ? configureClaude(sb, fake) : configureCodex(sb, fake);
  // `codex exec resume` (no --skip-git-repo-check) runs in a git repository, like a real project.
  if (!claude) expect(spawnSync('git', ['init', '-q'], { cwd: sb.proj }).status).toBe(0);
  // With the hooks `opencomms install` registers (Codex runs project hooks in a trusted project, once
  // they are reviewed: the bypass flag stands in for the review).
  const trust = o.hooks && !claude ? ['--dangerously-bypass-hook-trust'] : [];
  if (o.hooks) {
    await opencomms(sb, 'install', host);
    if (claude) trustClaudeProject(sb, env, ['opencomms']);
    else trustCodexProject(sb, env);
  }
  const first = claude
    ? await run(bin('claude'), claudeArgs('EARLIER-RUN hello', { maxTurns: 2, persist: true }), {
        cwd: sb.proj,
        env,
        timeoutMs: 60_000,
        forward: [fake.port],
      })
    : await run(bin('codex'), codexArgs('EARLIER-RUN hello', trust), {
        cwd: sb.proj,
        env,
        timeoutMs: 60_000,
        forward: [fake.port],
      });
  expect(first.code, describeRun(first)).toBe(0);
  const lines = jsonLines(first.stdout);
  const session = (
    claude
      ? lines.find((l) => l.type === 'system' && l.subtype === 'init')?.session_id
      : lines.find((l) => l.type === 'thread.started')?.thread_id
  ) as string;
  expect(session).toBeTruthy();
  const ns = defer(await namespaced(bin(claude ? 'claude' : 'codex'), [], { forward: [fake.port] }), (n) => n.close());
  const binVar = claude ? 'OPENCOMMS_CLAUDE_BIN' : 'OPENCOMMS_CODEX_BIN';
  const peer = defer(
    await startPeer(sb, newPin(), 'team', {
      ...env,
      [binVar]: [`"${process.execPath}" "${WRAP}"`, ...trust].join(' '),
      OC_NETNS_ARGV: JSON.stringify(ns.argv),
    }),
    (p) => p.close(),
  );
  await leadTeam(peer);
  const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
  const member = newPin();
  // As `opencomms mcp --host <host>` makes a member that asked for spawn_push.
  await joinTeam(rt, sb, member, host, { role: 'Worker', role_prompt: 'You work.' }, 'spawn_push');
  await opencomms(sb, 'install-member', '--host', host, '--id', member);
  await opencomms(sb, 'bind', '--host', host, '--session', session, '--id', member);
  const committed = async (id: string) => {
    const logged = await rt.store.history((await rt.read()).channels.team!.id, 50);
    return logged.find(
      (e) => e.message_id === id && e.delivery_status === 'delivered' && e.delivery_method === 'spawn_push',
    );
  };
  return {
    fake,
    peer,
    rt,
    member,
    committed,
    /** A peer send; resolves when the resumed client asked the model with the batch and it was committed. */
    async deliver(content: string) {
      const { id, at } = await peer.send(content);
      const req = await until(
        'the resumed client asks the model with the batch',
        () => fake.turns().find((r) => r.userTexts.some((t) => frameIds(t).includes(id))),
        60_000,
        () => peer.stderr.join(''),
      );
      await until('committed as spawn_push', () => committed(id), 60_000);
      return { id, at, req, ms: req.at - at };
    },
  };
}
