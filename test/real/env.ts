// Environment helpers of the real-client tests: a fresh HOME and project per test, spawning under
// `unshare -n` (loopback only) with a scrubbed environment and a hard timeout, and the exact
// per-client configuration (Claude Code, Codex, OpenCode) pointing at the fake model servers.
//
// Network: every client runs in its own network namespace, where 127.0.0.1 is not the test
// process's 127.0.0.1. The fake servers listen on the host's loopback (port 0), and
// `netns-exec.mjs` relays the same port numbers inside the namespace through Unix sockets
// (`forward`); a server started inside (e.g. `opencode serve`) is reached from the test through
// `expose`. Nothing else is reachable: DNS and outside connections fail at once.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readSync,
  closeSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FakeServer } from './fake/index.ts';

export const REAL_DIR = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = resolve(REAL_DIR, '../..');
export const BIN_DIR = join(REAL_DIR, 'node_modules', '.bin');
export const TOY_SERVER = join(REAL_DIR, 'fixtures', 'toy-mcp-server.mjs');
const NETNS_EXEC = join(REAL_DIR, 'netns-exec.mjs');

/** Pinned versions (the same as package.json); tests assert `--version` against these. */
export const VERSIONS = {
  claude: '2.1.332',
  codex: '0.171.0',
  opencode: '1.18.33',
  inspector: '2.12.0',
} as const;

// ---------------------------------------------------------------------------------------------
// Binaries

const POSTINSTALL: Record<string, { pkg: string; script: string }> = {
  claude: { pkg: '@anthropic-ai/claude-code', script: 'install.cjs' },
  opencode: { pkg: 'opencode-ai', script: 'postinstall.mjs' },
};

const isElf = (file: string): boolean => {
  const fd = openSync(file, 'r');
  try {
    const b = Buffer.alloc(4);
    return readSync(fd, b, 0, 4, 0) === 4 && b.toString('latin1') === '\x7fELF';
  } finally {
    closeSync(fd);
  }
};

const checked = new Map<string, string>();

/**
 * Absolute path of an installed client binary (`claude`, `codex`, `opencode`, `mcp-inspector`).
 * Throws with the reason when it is missing, so the test fails instead of skipping. Claude Code
 * and OpenCode put their native binary in place in a postinstall script; when npm skipped it
 * (install scripts not allowed, `--ignore-scripts`), it is run here once.
 */
export function bin(name: string): string {
  const done = checked.get(name);
  if (done) return done;
  const file = join(BIN_DIR, name);
  if (!existsSync(file)) {
    throw new Error(
      `${name} is not installed at ${file}: run \`npm install --prefix test/real\` first (see test/real/README.md)`,
    );
  }
  const post = POSTINSTALL[name];
  if (post && !isElf(file)) {
    const dir = join(REAL_DIR, 'node_modules', post.pkg);
    const r = spawnSync(process.execPath, [post.script], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    if (!isElf(file)) {
      throw new Error(
        `${name}: ${file} is not the native binary and running ${post.pkg}/${post.script} did not fix it ` +
          `(exit ${r.status}): ${r.stderr || r.stdout || r.error?.message}`,
      );
    }
  }
  checked.set(name, file);
  return file;
}

// ---------------------------------------------------------------------------------------------
// Sandboxes

export interface Sandbox {
  root: string;
  home: string;
  /** The project directory (cwd of the client). */
  proj: string;
  tmp: string;
  /** The scrubbed base environment: PATH, HOME, XDG dirs, TMPDIR, locale. Nothing inherited. */
  env: Record<string, string>;
  cleanup(): void;
}

/** A fresh temp dir with `home/` (+ XDG dirs), `proj/` and `tmp/`. Kept when KEEP_REAL_TMP=1. */
export function makeSandbox(name: string): Sandbox {
  const root = mkdtempSync(join(tmpdir(), `ocr-${name}-`));
  const home = join(root, 'home'),
    proj = join(root, 'proj'),
    tmp = join(root, 'tmp');
  const xdg = {
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
  };
  for (const d of [home, proj, tmp, join(root, 's'), ...Object.values(xdg)]) mkdirSync(d, { recursive: true });
  const env: Record<string, string> = {
    PATH: [
      BIN_DIR,
      dirname(process.execPath),
      '/usr/local/sbin',
      '/usr/local/bin',
      '/usr/sbin',
      '/usr/bin',
      '/sbin',
      '/bin',
    ].join(':'),
    HOME: home,
    USER: 'root',
    LOGNAME: 'root',
    SHELL: '/bin/bash',
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    NO_COLOR: '1',
    TMPDIR: tmp,
    ...xdg,
  };
  return {
    root,
    home,
    proj,
    tmp,
    env,
    cleanup() {
      if (process.env.KEEP_REAL_TMP === '1') console.error(`[real] kept ${root}`);
      else rmSync(root, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Spawning

export interface RunOptions {
  cwd: string;
  /** The whole environment of the command (start from `sandbox.env`); nothing else is inherited. */
  env: Record<string, string>;
  /** Hard limit: the whole process group is SIGKILLed when it is reached. */
  timeoutMs: number;
  /** Written to stdin, which is then closed (default: stdin is /dev/null). */
  input?: string;
  /** Host ports (the fake servers) reachable at the same 127.0.0.1 port inside the namespace. */
  forward?: number[];
  /** Ports of servers the command starts inside the namespace, to be reached from the test. */
  expose?: number[];
  /** Where the relay sockets go (default: a new temp dir). */
  socketDir?: string;
  /** Run without a network namespace (default false). */
  hostNetwork?: boolean;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  ms: number;
}

export interface Proc {
  child: ChildProcess;
  /** Host port on 127.0.0.1 for each `expose`d namespace port. */
  ports: Map<number, number>;
  stdout(): string;
  stderr(): string;
  /** Resolves with the output so far once `pattern` matches stdout+stderr; rejects on exit or timeout. */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<string>;
  /** Settles when the command exits (or is killed). */
  done: Promise<RunResult>;
  /** SIGTERM, then SIGKILL of the whole group after `graceMs`. */
  stop(graceMs?: number): Promise<RunResult>;
}

// The relays carry HTTP. When the far side cannot be reached (the server is not listening yet),
// the client gets a 502 at once: a bare close or reset before any response byte makes Node 20's
// fetch hang until its own timeout.
const BAD_GATEWAY = 'HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n';
const relayServer = (onConn: (c: net.Socket) => net.Socket) =>
  net.createServer((c) => {
    const o = onConn(c);
    let connected = false;
    o.once('connect', () => {
      connected = true;
    });
    o.on('error', () => (connected ? c.end() : c.end(BAD_GATEWAY)));
    o.on('close', () => c.end());
    c.on('error', () => o.destroy());
    c.on('close', () => o.end());
    c.pipe(o);
    o.pipe(c);
  });

const listenOn = (s: net.Server, ...where: unknown[]) =>
  new Promise<void>((res, rej) => {
    s.once('error', rej);
    (s.listen as (...a: unknown[]) => void)(...where, () => res());
  });

const killGroup = (pid: number | undefined, sig: NodeJS.Signals) => {
  if (!pid) return;
  try {
    process.kill(-pid, sig);
  } catch {
    // the group is gone
  }
};

/** A command wrapped for a loopback-only network namespace: the argv to run and the relays that
 *  carry its `forward` / `expose` ports (close them when the command is gone). */
export interface Namespaced {
  argv: string[];
  ports: Map<number, number>;
  close(): void;
}

export async function namespaced(
  cmd: string,
  args: string[],
  o: Pick<RunOptions, 'forward' | 'expose' | 'socketDir' | 'hostNetwork'>,
): Promise<Namespaced> {
  const relays: net.Server[] = [];
  const ports = new Map<number, number>();
  if (o.hostNetwork) return { argv: [cmd, ...args], ports, close() {} };
  const sockDir = o.socketDir ?? mkdtempSync(join(tmpdir(), 'ocr-s-'));
  const spec = { forward: [] as { port: number; sock: string }[], expose: [] as { port: number; sock: string }[] };
  for (const port of o.forward ?? []) {
    const sock = join(sockDir, `f${port}-${process.pid}-${relays.length}.sock`);
    const s = relayServer(() => net.connect(port, '127.0.0.1'));
    await listenOn(s, sock);
    relays.push(s);
    spec.forward.push({ port, sock });
  }
  for (const port of o.expose ?? []) {
    const sock = join(sockDir, `e${port}-${process.pid}-${relays.length}.sock`);
    const s = relayServer(() => net.connect(sock));
    await listenOn(s, 0, '127.0.0.1');
    relays.push(s);
    ports.set(port, (s.address() as AddressInfo).port);
    spec.expose.push({ port, sock });
  }
  return {
    argv: ['unshare', '-n', '--', process.execPath, NETNS_EXEC, JSON.stringify(spec), '--', cmd, ...args],
    ports,
    close() {
      for (const r of relays) r.close();
      if (!o.socketDir) rmSync(sockDir, { recursive: true, force: true });
    },
  };
}

/** Starts a command (in its own process group, by default in a loopback-only network namespace). */
export async function start(cmd: string, args: string[], o: RunOptions): Promise<Proc> {
  const { argv, ports, close: closeRelays } = await namespaced(cmd, args, o);
  const t0 = performance.now();
  const child = spawn(argv[0], argv.slice(1), {
    cwd: o.cwd,
    env: o.env,
    detached: true, // own process group: a timeout kills the client and everything it started
    stdio: [o.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (o.input !== undefined) child.stdin!.end(o.input);
  let out = '',
    err = '',
    timedOut = false;
  const waiters = new Set<() => void>();
  child.stdout!.on('data', (d: Buffer) => {
    out += d;
    for (const w of waiters) w();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d;
    for (const w of waiters) w();
  });
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child.pid, 'SIGKILL');
  }, o.timeoutMs);
  const done = new Promise<RunResult>((res) => {
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      killGroup(child.pid, 'SIGKILL'); // leftovers (MCP servers, helpers) of the group
      closeRelays();
      for (const w of waiters) w();
      res({ code, signal, stdout: out, stderr: err, timedOut, ms: Math.round(performance.now() - t0) });
    };
    child.on('error', (e) => {
      err += `\nspawn error: ${e.message}`;
      finish(null, null);
    });
    child.on('close', finish);
  });
  let exited = false;
  void done.then(() => {
    exited = true;
  });
  return {
    child,
    ports,
    done,
    stdout: () => out,
    stderr: () => err,
    waitFor(pattern, timeoutMs) {
      return new Promise<string>((res, rej) => {
        const check = () => {
          const all = out + err;
          if (pattern.test(all)) {
            cleanupW();
            res(all);
          } else if (exited) {
            cleanupW();
            rej(new Error(`exited before ${pattern}:\n${tail(all)}`));
          }
        };
        const t = setTimeout(() => {
          cleanupW();
          rej(new Error(`timeout ${timeoutMs} ms waiting for ${pattern}:\n${tail(out + err)}`));
        }, timeoutMs);
        const cleanupW = () => {
          clearTimeout(t);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async stop(graceMs = 2000) {
      if (!exited) {
        killGroup(child.pid, 'SIGTERM');
        const t = setTimeout(() => killGroup(child.pid, 'SIGKILL'), graceMs);
        const r = await done;
        clearTimeout(t);
        return r;
      }
      return done;
    },
  };
}

/** Runs a command to completion under the timeout. Never rejects: check `code` / `timedOut`. */
export async function run(cmd: string, args: string[], o: RunOptions): Promise<RunResult> {
  return (await start(cmd, args, o)).done;
}

export const tail = (s: string, n = 3000): string => (s.length > n ? `…${s.slice(-n)}` : s);

/** A one-paragraph description of a run, for assertion messages. */
export const describeRun = (r: RunResult): string =>
  `exit=${r.code} signal=${r.signal} timedOut=${r.timedOut} ms=${r.ms}\n--- stdout ---\n${tail(r.stdout)}\n--- stderr ---\n${tail(r.stderr)}`;

/** Parses the JSON lines of an NDJSON / stream-json output, ignoring other lines. */
export function jsonLines(s: string): any[] {
  const out: any[] = [];
  for (const line of s.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      out.push(JSON.parse(t));
    } catch {
      // not JSON
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Per-client configuration

export interface McpServerSpec {
  command: string;
  args: string[];
  env?: Record<string, string>;
}

/** The toy MCP server (`echo {text}`), logging its calls to `log` when given. */
export const toyServer = (log?: string): McpServerSpec => ({
  command: process.execPath,
  args: [TOY_SERVER],
  env: log ? { TOY_LOG: log } : {},
});

/**
 * Claude Code: env pointing at the fake Anthropic server, `$CLAUDE_CONFIG_DIR/settings.json`, and
 * `<proj>/.mcp.json` when MCP servers are given (tools are named `mcp__<server>__<tool>`).
 * `ENABLE_TOOL_SEARCH=false` makes the MCP tools appear in the request's `tools` (else they are
 * deferred behind a ToolSearch tool). `MCP_CONNECTION_NONBLOCKING=false` makes Claude Code connect
 * its MCP servers before the init message and the first request (by default it reports a server
 * still starting as "pending" and sends the first request without its tools). MCP tools need
 * `--allowedTools` in `-p` mode:
 * `claudeArgs` passes every tool of the given servers as `mcp__<server>`.
 */
export function configureClaude(
  sb: Sandbox,
  fake: FakeServer,
  mcpServers: Record<string, McpServerSpec> = {},
): Record<string, string> {
  const configDir = join(sb.home, '.claude');
  mkdirSync(configDir, { recursive: true });
  writeFileSync(
    join(configDir, 'settings.json'),
    JSON.stringify(
      {
        enableAllProjectMcpServers: true,
        permissions: { allow: Object.keys(mcpServers).map((s) => `mcp__${s}`) },
      },
      null,
      2,
    ),
  );
  if (Object.keys(mcpServers).length) {
    const servers = Object.fromEntries(
      Object.entries(mcpServers).map(([k, s]) => [
        k,
        { type: 'stdio', command: s.command, args: s.args, env: s.env ?? {} },
      ]),
    );
    writeFileSync(join(sb.proj, '.mcp.json'), JSON.stringify({ mcpServers: servers }, null, 2));
  }
  return {
    ...sb.env,
    CLAUDE_CONFIG_DIR: configDir,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: 'sk-ant-fake',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_BUG_COMMAND: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ENABLE_TOOL_SEARCH: 'false',
    MCP_CONNECTION_NONBLOCKING: 'false',
  };
}

/**
 * Interactive Claude Code with no dialog (notes/claude-code-wake.md): onboarding done, the fake API
 * key approved and the project trusted (in both `$HOME/.claude.json` and `$CLAUDE_CONFIG_DIR/.claude.json`),
 * and the project's `.mcp.json` servers `servers` enabled and their tools allowed in the user settings.
 */
export function trustClaudeProject(sb: Sandbox, env: Record<string, string>, servers: string[]) {
  const configDir = env.CLAUDE_CONFIG_DIR!;
  const key = env.ANTHROPIC_API_KEY!;
  const state = JSON.stringify({
    hasCompletedOnboarding: true,
    customApiKeyResponses: { approved: [key.slice(-20)], rejected: [] },
    projects: { [sb.proj]: { hasTrustDialogAccepted: true } },
  });
  writeFileSync(join(sb.home, '.claude.json'), state);
  writeFileSync(join(configDir, '.claude.json'), state);
  writeFileSync(
    join(configDir, 'settings.json'),
    JSON.stringify(
      {
        enabledMcpjsonServers: servers,
        permissions: { allow: servers.map((s) => `mcp__${s}`) },
      },
      null,
      2,
    ),
  );
}

/** Codex trusts the project, so it loads the project's `.codex/` config and hooks. */
export function trustCodexProject(sb: Sandbox, env: Record<string, string>) {
  appendFileSync(
    join(env.CODEX_HOME!, 'config.toml'),
    `\n[projects.${JSON.stringify(sb.proj)}]\ntrust_level = "trusted"\n`,
  );
}

/** `claude -p` arguments: stream-json output, a fixed model id, no session files unless `persist`
 *  (a hook reads the session's transcript; a later run resumes it). */
export function claudeArgs(
  prompt: string,
  opts: { mcpConfig?: string; allowedTools?: string[]; maxTurns?: number; extra?: string[]; persist?: boolean } = {},
): string[] {
  return [
    '-p',
    prompt,
    '--output-format',
    'stream-json',
    '--verbose',
    '--model',
    'claude-sonnet-4-5',
    '--max-turns',
    String(opts.maxTurns ?? 4),
    ...(opts.persist ? [] : ['--no-session-persistence']),
    ...(opts.mcpConfig ? ['--mcp-config', opts.mcpConfig, '--strict-mcp-config'] : []),
    ...(opts.allowedTools?.length ? ['--allowedTools', opts.allowedTools.join(',')] : []),
    ...(opts.extra ?? []),
  ];
}

const toml = (v: unknown): string => {
  if (typeof v === 'string') return JSON.stringify(v); // TOML basic strings take JSON escapes
  if (Array.isArray(v)) return `[${v.map(toml).join(', ')}]`;
  if (v && typeof v === 'object')
    return `{ ${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)} = ${toml(x)}`)
      .join(', ')} }`;
  return String(v);
};

/**
 * Codex: `$CODEX_HOME/config.toml` with the fake Responses provider (`wire_api = "responses"`;
 * "chat" is rejected by 0.171), MCP servers approved without prompts and required (Codex leaves an
 * optional server that has not listed its tools within 1 s out of the turn, and `codex exec` has one
 * turn; a required one is waited for, and one that cannot start fails the run), plugins off (else
 * Codex runs `git ls-remote` against GitHub at start). Run `codex exec --skip-git-repo-check --json <prompt>`
 * with stdin closed.
 */
export function configureCodex(
  sb: Sandbox,
  fake: FakeServer,
  mcpServers: Record<string, McpServerSpec> = {},
): Record<string, string> {
  const codexHome = join(sb.home, '.codex');
  mkdirSync(codexHome, { recursive: true });
  const lines = [
    'model = "fake-model"',
    'model_provider = "fake"',
    'approval_policy = "never"',
    'sandbox_mode = "read-only"',
    'check_for_update_on_startup = false',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    'plugins = false',
    'remote_plugin = false',
    '',
    '[model_providers.fake]',
    'name = "Fake local"',
    `base_url = ${toml(`${fake.url}/v1`)}`,
    'env_key = "FAKE_API_KEY"',
    'wire_api = "responses"',
  ];
  for (const [name, s] of Object.entries(mcpServers)) {
    lines.push(
      '',
      `[mcp_servers.${name}]`,
      `command = ${toml(s.command)}`,
      `args = ${toml(s.args)}`,
      'default_tools_approval_mode = "approve"',
      'required = true',
      `env = ${toml(s.env ?? {})}`,
    );
  }
  writeFileSync(join(codexHome, 'config.toml'), `${lines.join('\n')}\n`);
  return { ...sb.env, CODEX_HOME: codexHome, FAKE_API_KEY: 'sk-fake' };
}

export const codexArgs = (prompt: string, extra: string[] = []): string[] => [
  'exec',
  '--skip-git-repo-check',
  '--json',
  ...extra,
  prompt,
];

const OPENCODE_LOCK = JSON.stringify({
  lockfileVersion: 3,
  packages: { '': { dependencies: { '@opencode-ai/plugin': VERSIONS.opencode } } },
});

/**
 * OpenCode: `<proj>/opencode.json` with the fake OpenAI-compatible provider (`fake/fake-model`),
 * MCP servers as `type: local` (tools are named `<server>_<tool>`), the OPENCODE_DISABLE_* env, and
 * the fix for the plugin-dependency install that hangs forever offline: a lock stub
 * (`package-lock.json` naming @opencode-ai/plugin) plus `node_modules` in both config dirs
 * (`$XDG_CONFIG_HOME/opencode` and `<proj>/.opencode`). The project one links test/real/node_modules,
 * so a plugin in `<proj>/.opencode/plugin/` can `import { tool } from "@opencode-ai/plugin"`.
 */
export function configureOpenCode(
  sb: Sandbox,
  fake: FakeServer,
  mcpServers: Record<string, McpServerSpec> = {},
): Record<string, string> {
  const cfg: Record<string, unknown> = {
    $schema: 'https://opencode.ai/config.json',
    autoupdate: false,
    share: 'disabled',
    model: 'fake/fake-model',
    small_model: 'fake/fake-model',
    enabled_providers: ['fake'],
    provider: {
      fake: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Fake local',
        options: { baseURL: `${fake.url}/v1`, apiKey: 'sk-fake' },
        models: { 'fake-model': { name: 'Fake Model', tool_call: true, limit: { context: 100000, output: 4096 } } },
      },
    },
    permission: { edit: 'allow', bash: 'allow', webfetch: 'deny' },
  };
  if (Object.keys(mcpServers).length) {
    cfg.mcp = Object.fromEntries(
      Object.entries(mcpServers).map(([k, s]) => [
        k,
        { type: 'local', command: [s.command, ...s.args], environment: s.env ?? {} },
      ]),
    );
  }
  writeFileSync(join(sb.proj, 'opencode.json'), JSON.stringify(cfg, null, 2));
  const globalDir = join(sb.env.XDG_CONFIG_HOME, 'opencode');
  mkdirSync(join(globalDir, 'node_modules'), { recursive: true });
  writeFileSync(join(globalDir, 'package-lock.json'), OPENCODE_LOCK);
  const projDir = join(sb.proj, '.opencode');
  mkdirSync(projDir, { recursive: true });
  if (!existsSync(join(projDir, 'node_modules')))
    symlinkSync(join(REAL_DIR, 'node_modules'), join(projDir, 'node_modules'), 'dir');
  writeFileSync(join(projDir, 'package-lock.json'), OPENCODE_LOCK);
  return {
    ...sb.env,
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_SHARE: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
    OPENCODE_DISABLE_EXTERNAL_SKILLS: '1',
  };
}

/** Polls `url` (with a 1 s limit per try) until it answers 200; OpenCode's port opens ~2 s after spawn. */
export async function waitHttp(url: string, timeoutMs: number): Promise<void> {
  const end = performance.now() + timeoutMs;
  let last = '';
  while (performance.now() < end) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (r.ok) return;
      last = `HTTP ${r.status}`;
    } catch (e) {
      last = String(e);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not up after ${timeoutMs} ms (${last})`);
}
