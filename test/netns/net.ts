// Machines of the proof: Linux network namespaces, each reaching the root namespace only through its
// veth pair (10.231.<n>.1/30 outside, .2 inside: addresses of these test hosts only, routed nowhere
// else), and a forwarder in the root namespace from the pair's outer address to the PostgreSQL the
// run uses (its URL's port on loopback). A partition is the outer end of the pair down.
import { execFileSync, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createInterface } from 'node:readline';

export const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
const quiet = (...args: string[]) => {
  try {
    ip(...args);
  } catch {
    // absent already
  }
};

export const FORWARD_PORT = 15_432;
/** The port of the forwarder inside each namespace (the agent's loopback URL). */
export const INNER_PORT = 5_432;

/** Carries `localPort` on this namespace's loopback to `port` at `host`: inside a machine, the
 *  loopback URL every OpenComms process uses reaches the server across the veth pair. */
export async function forwardLoopback(localPort: number, host: string, port: number): Promise<Server> {
  const server = createServer((inner) => {
    const outer = connect(port, host);
    inner.pipe(outer).pipe(inner);
    const end = () => {
      inner.destroy();
      outer.destroy();
    };
    inner.on('error', end);
    outer.on('error', end);
  });
  await new Promise<void>((r) => server.listen(localPort, '127.0.0.1', r));
  return server;
}

/** The database URL as an agent inside a namespace reaches it: the same user, password and
 *  database, through the namespace's forwarder on its loopback. */
export function insideUrl(url: string): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(INNER_PORT);
  return u.toString();
}

export class Machine {
  readonly ns: string;
  readonly outer: string;
  readonly inner: string;
  readonly gateway: string;
  readonly id = randomUUID();
  private forwarder: Server | null = null;
  private sockets = new Set<Socket>();

  /** `url`: the PostgreSQL of the run (the forwarder's target; the agents' credentials). */
  constructor(
    readonly n: number,
    readonly url: string,
  ) {
    this.ns = `ocm${n}`;
    this.outer = `ocm${n}h`;
    this.inner = `ocm${n}n`;
    this.gateway = `10.231.${n}.1`;
  }

  /** Whatever a previous run left behind under these names. */
  static clean(n: number) {
    const m = new Machine(n, 'postgres://127.0.0.1/');
    m.killAll();
    quiet('netns', 'del', m.ns);
    quiet('link', 'del', m.outer);
  }

  async up() {
    Machine.clean(this.n);
    ip('netns', 'add', this.ns);
    ip('link', 'add', this.outer, 'type', 'veth', 'peer', 'name', this.inner);
    ip('link', 'set', this.inner, 'netns', this.ns);
    ip('addr', 'add', `${this.gateway}/30`, 'dev', this.outer);
    ip('link', 'set', this.outer, 'up');
    ip('-n', this.ns, 'addr', 'add', `10.231.${this.n}.2/30`, 'dev', this.inner);
    ip('-n', this.ns, 'link', 'set', this.inner, 'up');
    ip('-n', this.ns, 'link', 'set', 'lo', 'up');
    const target = new URL(this.url);
    const port = Number(target.port || 5432);
    this.forwarder = createServer((a) => {
      const b = connect(port, target.hostname);
      this.sockets.add(a).add(b);
      a.pipe(b).pipe(a);
      const end = () => {
        a.destroy();
        b.destroy();
        this.sockets.delete(a);
        this.sockets.delete(b);
      };
      a.on('error', end).on('close', end);
      b.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => this.forwarder!.listen(FORWARD_PORT, this.gateway, r));
  }

  partition(on: boolean) {
    ip('link', 'set', this.outer, on ? 'down' : 'up');
  }

  killAll() {
    let pids: string[] = [];
    try {
      pids = ip('netns', 'pids', this.ns).split('\n').filter(Boolean);
    } catch {
      return;
    }
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }

  /** The machine dies whole: every process SIGKILLed, its namespace and link deleted. */
  async down() {
    this.killAll();
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await new Promise<void>((r) => (this.forwarder ? this.forwarder.close(() => r()) : r()));
    this.forwarder = null;
    quiet('netns', 'del', this.ns);
    quiet('link', 'del', this.outer);
  }

  /** `leaseMs` null: the default lease. `env`: more of the agent's environment. */
  agent(a: {
    key: string;
    sid: string;
    role: string;
    worktree: string;
    received: string;
    leaseMs: number | null;
    env?: Record<string, string>;
  }): Agent {
    const child = this.spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'test/netns/agent.ts',
        this.gateway,
        String(FORWARD_PORT),
        String(INNER_PORT),
        a.key,
        a.sid,
        a.role,
        a.worktree,
        a.received,
      ],
      {
        ...(a.leaseMs === null ? {} : { OPENCOMMS_LEASE_MS: String(a.leaseMs) }),
        OPENCOMMS_AGENT_DATABASE_URL: insideUrl(this.url),
        ...a.env,
      },
      ['pipe', 'pipe', 'inherit'],
    );
    return new Agent(child);
  }

  /** A process of this machine: inside its namespace, with its machine id (`ip netns exec` execs
   *  the command, so the child's PID is the command's own). */
  spawn(command: string, args: string[], env: NodeJS.ProcessEnv, stdio: StdioOptions): ChildProcess {
    return spawn('ip', ['netns', 'exec', this.ns, command, ...args], {
      env: { ...process.env, ...env, OPENCOMMS_MACHINE_ID: this.id },
      stdio,
    });
  }
}

/** The test's side of an agent process: numbered commands, their answers, and what it was shown. */
export class Agent {
  private next = 1;
  private waiting = new Map<number, (v: unknown) => void>();
  readonly logs: string[] = [];
  /** When each envelope id was shown to this agent's host (this process's monotonic clock, ms). */
  readonly shownAt = new Map<string, number>();
  /** The same on the host's wall clock, as the agent read it (fractional ms). */
  readonly shownWall = new Map<string, number>();
  /** Each lease query as it was sent (the agent's wall clock). */
  readonly leaseQueries: Array<{ kind: 'renew' | 'snapshot'; at: number }> = [];
  /** Trace points (OPENCOMMS_AGENT_TRACE=1): what, and when on the agent's wall clock. */
  readonly traces: Array<{ what: string; at: number }> = [];
  /** Prompts this agent's host refused because the session is not one of its own (a 404). */
  readonly foreign: Array<{ rid: string; ids: string[] }> = [];

  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = JSON.parse(line) as {
        id?: number;
        answer?: unknown;
        error?: string;
        log?: string;
        shown?: string[];
        at?: number;
        lease_query?: 'renew' | 'snapshot';
        trace?: string;
        foreign?: string;
        ids?: string[];
      };
      if (m.log) this.logs.push(m.log);
      if (m.lease_query && m.at !== undefined) this.leaseQueries.push({ kind: m.lease_query, at: m.at });
      if (m.trace && m.at !== undefined) this.traces.push({ what: m.trace, at: m.at });
      if (m.foreign) this.foreign.push({ rid: m.foreign, ids: m.ids ?? [] });
      for (const id of m.shown ?? []) {
        if (this.shownAt.has(id)) continue;
        this.shownAt.set(id, performance.now());
        if (m.at !== undefined) this.shownWall.set(id, m.at);
      }
      if (m.id !== undefined) this.waiting.get(m.id)?.(m.error ? { error: m.error } : m.answer);
    });
  }

  call<T = Record<string, unknown>>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    const id = this.next++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve as (v: unknown) => void);
      this.child.stdin!.write(`${JSON.stringify({ id, op, ...args })}\n`);
    });
  }
}
