// The wake simulation's world (issue 41, item 7): scripted agents on the REAL runtime and store
// (a FileStore temp project, or a PostgreSQL project bound by .opencomms/store.json), on a virtual
// clock. The runtime's `now` is the world's clock; the delivery policy's timers (Deliveries.arm:
// cooldown ends, budget slots, stale windows) become events of the world's queue instead of real
// timeouts, so minutes of agent time run in milliseconds and every run is the same run.
//
// A WAKE is a hand-over through the push driver (`deliver`): the "woken turn". The agent's script
// answers it after its think time, with a send at that virtual time. A "person turn" is a pull
// with method 'push' (a hook's boundary hand-over): it is no wake.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Caller } from '../../src/engine/index.ts';
import type { ToolResult } from '../../src/protocol/result.ts';
import type { Channel, State } from '../../src/protocol/schema.ts';
import { openRuntime, type Runtime, type RuntimeOptions } from '../../src/runtime/runtime.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../helpers/postgres.ts';

export type StoreKind = 'file' | 'postgres';

/** A fresh project on `kind`: a temp dir, bound to a fresh PostgreSQL project key for 'postgres'. */
export async function freshProject(kind: StoreKind): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `oc-sim-${kind}-`));
  let key: string | null = null;
  if (kind === 'postgres') {
    key = newProjectKey('sim');
    await mkdir(join(dir, '.opencomms'), { recursive: true });
    await writeFile(
      join(dir, '.opencomms', 'store.json'),
      JSON.stringify({ kind: 'postgres', url: testDatabaseUrl(), key }),
    );
  }
  return {
    dir,
    cleanup: async () => {
      await rm(dir, { recursive: true, force: true });
      if (key) await dropProject(key);
    },
  };
}

export const caller = (session_id: string, worktree: string): Caller => ({
  session_id,
  host: 'sim',
  surface: 'cli',
  delivery_mode: 'push',
  host_session_id: session_id,
  project_id: 'local-project',
  worktree,
});

/** What a woken agent is handed: its batch, the contents and senders as stored. */
export interface Turn {
  sid: string;
  at: number;
  ids: string[];
  contents: string[];
  senders: string[];
  text: string;
  redelivery: boolean;
}

/** An agent's script: what it sends after a wake, and how long after. */
export type Agent = (turn: Turn, world: World) => Array<{ after: number; args: Record<string, unknown> }>;

interface Event {
  at: number;
  seq: number;
  kind: 'agent' | 'timer';
  run: () => Promise<void>;
}

export interface Wake {
  rid: string;
  at: number;
  ids: string[];
  redelivery: boolean;
  text: string;
  /** The lowest wake chain of the batch (the wake's chain when the batch is all that waited). */
  chain: number;
}

export class World {
  t: number;
  rt!: Runtime;
  readonly agents = new Map<string, Agent>();
  /** Every driver hand-over: the wakes as the host saw them. */
  readonly wakes: Wake[] = [];
  /** Ids handed to each recipient, in hand-over order (wakes and pulls). */
  readonly delivered = new Map<string, string[]>();
  /** Ids queued for each recipient, in send order. */
  readonly sent = new Map<string, string[]>();
  readonly refusals: Array<{ sid: string; reason: string; at: number }> = [];
  /** Person turns: pull answers with method 'push'. */
  readonly pulls: Array<{ sid: string; at: number; ids: string[]; notice?: string }> = [];
  private queue: Event[] = [];
  private seq = 0;
  private timerAt = Infinity;
  private timerEvent: Event | null = null;
  /** Scans the delivery policy asked for at an instant a scan already ran at (a zero-delay
   *  re-arm: in a real process, a timer that fires at once, again and again). */
  spins = 0;
  private lastScanAt = -1;
  /** Wakes after which the world stops (a scripted pause, e.g. before a kill). */
  onWake: ((w: Wake) => void) | null = null;
  /** Awaited before a hand-over returns to the runtime (a host that never answers: a hang). */
  handOver: ((w: Wake) => Promise<void>) | null = null;
  stopped = false;

  constructor(
    readonly dir: string,
    start: number,
    private readonly rtOpts: Partial<RuntimeOptions> = {},
  ) {
    this.t = start;
  }

  open(): this {
    this.rt = openRuntime(this.dir, {
      now: () => this.t,
      log: () => {},
      ...this.rtOpts,
      driver: {
        method: 'push',
        owns: (rid) => this.agents.has(rid),
        deliver: async (rid, text, ids, redelivery) => this.woken(rid, text, ids, redelivery),
      },
    });
    // The delivery policy's timer, on the virtual clock: one pending scan at the earliest time asked.
    this.rt.deliveries.arm = (at: number) => this.arm(at);
    return this;
  }

  private closed = false;

  async close() {
    if (this.closed) return;
    this.closed = true;
    this.stopped = true;
    await this.rt.settled();
    await this.rt.close();
  }

  private arm(at: number) {
    if (at >= this.timerAt) return;
    if (at <= this.t && this.lastScanAt === this.t) {
      this.spins++;
      return;
    }
    if (this.timerEvent) this.queue = this.queue.filter((e) => e !== this.timerEvent);
    this.timerAt = at;
    const ev: Event = {
      at: Math.max(at, this.t),
      seq: this.seq++,
      kind: 'timer',
      run: async () => {
        this.timerAt = Infinity;
        this.timerEvent = null;
        this.lastScanAt = this.t;
        await this.rt.scan();
      },
    };
    this.timerEvent = ev;
    this.queue.push(ev);
  }

  private async woken(rid: string, text: string, ids: string[], redelivery: boolean) {
    const state = await this.rt.peek();
    const envs = ids.map((id) => state.messages[id]!);
    const chain = Math.min(...envs.map((e) => e.wake_chain ?? 0));
    const w: Wake = { rid, at: this.t, ids, redelivery, text, chain };
    this.wakes.push(w);
    this.record(rid, ids);
    this.onWake?.(w);
    if (this.handOver) await this.handOver(w);
    if (this.stopped) return;
    const agent = this.agents.get(rid);
    if (!agent) return;
    const turn: Turn = {
      sid: rid,
      at: this.t,
      ids,
      contents: envs.map((e) => e.content),
      senders: envs.map((e) => e.sender_session_id),
      text,
      redelivery,
    };
    for (const { after, args } of agent(turn, this)) this.later(after, () => this.send(rid, args));
  }

  private record(rid: string, ids: string[]) {
    const list = this.delivered.get(rid) ?? [];
    list.push(...ids);
    this.delivered.set(rid, list);
  }

  /** Runs `fn` at `after` ms of virtual time from now. */
  later(after: number, fn: () => unknown) {
    this.queue.push({
      at: this.t + after,
      seq: this.seq++,
      kind: 'agent',
      run: async () => void (await fn()),
    });
  }

  /** A member sends now: the ids it queued are recorded per recipient, a refusal by its reason. */
  async send(sid: string, args: Record<string, unknown>): Promise<ToolResult> {
    const r = await this.rt.run({ op: 'send', sid, args: args as { channel: unknown; content: unknown } });
    if (!r.ok) {
      this.refusals.push({ sid, reason: (r.data as { reason: string }).reason, at: this.t });
      return r;
    }
    const d = r.data as { message_ids: string[]; recipients: Array<{ session_id: string }> };
    d.recipients.forEach((to, i) => {
      const list = this.sent.get(to.session_id) ?? [];
      list.push(d.message_ids[i]!);
      this.sent.set(to.session_id, list);
    });
    return r;
  }

  /** A person turn: the hook's boundary hand-over (a pull with method 'push'), all of it. */
  async personTurn(sid: string): Promise<{ ids: string[]; notice?: string }> {
    const ids: string[] = [];
    let notice: string | undefined;
    for (;;) {
      const r = await this.rt.run({ op: 'pull', sid, args: {}, method: 'push' });
      if (!r.ok) throw new Error(`pull refused: ${JSON.stringify(r)}`);
      const d = r.data as { message_ids: string[]; notice?: string; remaining: number };
      ids.push(...d.message_ids);
      if (d.notice) notice = notice ? `${notice}\n${d.notice}` : d.notice;
      if (!d.message_ids.length || !d.remaining) break;
    }
    this.record(sid, ids);
    this.pulls.push({ sid, at: this.t, ids, ...(notice ? { notice } : {}) });
    return { ids, ...(notice ? { notice } : {}) };
  }

  /** Runs the world until nothing is left to do, or `until` (virtual ms since now), or `maxEvents`. */
  async run(opts: { for?: number; maxEvents?: number } = {}) {
    const end = opts.for === undefined ? Infinity : this.t + opts.for;
    let n = 0;
    for (;;) {
      await this.rt.settled();
      if (this.stopped) return;
      this.queue.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const ev = this.queue[0];
      if (!ev || ev.at > end || n++ >= (opts.maxEvents ?? 10_000)) break;
      this.queue.shift();
      this.t = Math.max(this.t, ev.at);
      await ev.run();
    }
    if (end !== Infinity) this.t = Math.max(this.t, end);
  }

  /** Agent events still waiting (timers aside). */
  get busy() {
    return this.queue.some((e) => e.kind === 'agent');
  }

  async state(): Promise<State> {
    return this.rt.read();
  }

  async channel(name: string): Promise<Channel> {
    const c = (await this.state()).channels[name];
    if (!c) throw new Error(`no channel ${name}`);
    return c;
  }

  wakesOf(rid: string) {
    return this.wakes.filter((w) => w.rid === rid).length;
  }
}

/** Creates `name` with the members (the first creates it, each in push mode). */
export async function setUp(
  world: World,
  name: string,
  members: Array<[sid: string, role: string]>,
  args: Record<string, unknown> = {},
) {
  const [first, ...rest] = members;
  const c = await world.rt.run({
    op: 'create',
    caller: caller(first![0], world.dir),
    args: { channel: name, role: first![1], role_prompt: `Act as ${first![1]}.`, ...args },
  });
  if (!c.ok) throw new Error(`create refused: ${JSON.stringify(c)}`);
  for (const [sid, role] of rest) {
    const j = await world.rt.run({
      op: 'join',
      caller: caller(sid, world.dir),
      args: { channel: name, role, role_prompt: `Act as ${role}.` },
    });
    if (!j.ok) throw new Error(`join refused: ${JSON.stringify(j)}`);
  }
}

/** The ledger's wakes per member and in all. */
export function ledgerWakes(ch: Channel): { total: number; per: Record<string, number>; held: number } {
  const per: Record<string, number> = {};
  let held = 0;
  for (const [rid, u] of Object.entries(ch.usage ?? {})) {
    per[rid] = u.total.wakes;
    held += u.total.held;
  }
  return { total: Object.values(per).reduce((a, b) => a + b, 0), per, held };
}

/** What a delivery check finds: ids sent and never handed over, ids handed over twice, and
 *  recipients whose hand-overs are out of send order. */
export function audit(world: Pick<World, 'sent' | 'delivered'>) {
  const lost: string[] = [];
  const duplicated: string[] = [];
  const outOfOrder: string[] = [];
  const rids = new Set([...world.sent.keys(), ...world.delivered.keys()]);
  for (const rid of rids) {
    const sent = world.sent.get(rid) ?? [];
    const got = world.delivered.get(rid) ?? [];
    const seen = new Set<string>();
    for (const id of got) {
      if (seen.has(id)) duplicated.push(id);
      seen.add(id);
    }
    for (const id of sent) if (!seen.has(id)) lost.push(id);
    const firsts = got.filter((id, i) => got.indexOf(id) === i);
    if (firsts.join() !== sent.filter((id) => seen.has(id)).join()) outOfOrder.push(rid);
  }
  return { lost, duplicated, outOfOrder };
}
