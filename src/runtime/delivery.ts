// The one delivery policy of every host (protocol.md "Owner-side delivery"; hosts.md "spawn_push"): which recipients this
// process delivers to, when, and by which route. Every route stays on this process's computer
// (computers.md "Whose sessions a process delivers to"). Adapters only translate to their host:
//   own     sessions this process serves (OpenCode push, a Claude Code wake waiter);
//   spawn   spawn_push members of this computer continued with a host CLI, for this process's own sends
//           and re-drains;
//   cross   push sessions of this computer nobody serves, CROSS_SERVER_FALLBACK_MS after this process
//           queued mail for them, and ONE retry DELIVERY_RETRY_MS after such a hand-over failed.
// Per recipient one drain/hand-over cycle at a time (the in-flight guard), the batch persisted in
// flight before the host sees it, then commit, requeue, or (a host that confirms later) neither.
import type { Hold } from '../../machines/index.ts';
import { spawnEligible } from '../engine/eligibility.ts';
import { memberWorktree, memberships, onLiveRoster } from '../engine/lookup.ts';
import { nextDue, pendingRecipients, type Command, type Effect, type Env, type Outcome } from '../engine/index.ts';
import type { DrainOptions } from '../engine/deliver.ts';
import { CROSS_SERVER_FALLBACK_MS, DELIVERY_RETRY_MS } from '../protocol/limits.ts';
import type { ToolResult } from '../protocol/result.ts';
import type { State } from '../protocol/schema.ts';

/** What a host adapter implements so the runtime can hand batches to its sessions. */
export interface DeliveryDriver {
  readonly method: 'push' | 'spawn_push';
  /** Whether this process delivers to `rid`. Without it: the sessions the host reported here
   *  (`Runtime.serve`) whose recorded owner is this process, or nobody alive. */
  owns?(rid: string, state: Readonly<State>): boolean;
  /** A hold only the host knows (the session is busy), checked right before each drain. */
  hold?(rid: string): Hold | null | Promise<Hold | null>;
  /** Resolves when the host accepted the batch; throws when it did not. `redelivery`: part of the
   *  batch was handed over before (crash window), so the host may already hold it. */
  deliver(rid: string, text: string, messageIds: string[], redelivery: boolean): Promise<void>;
  /** What the host shows whole of one hand-over, in shownSize units (adapters/route-limits.ts): a
   *  batch never exceeds it; the rest stays pending, in order. */
  maxSize?: number;
  /** May prompt a push session nobody serves (degraded, protocol.md "Owner-side delivery"). */
  crossServer?: boolean;
  /** The host confirms the hand-over later (a hook of the woken turn commits it): the batch stays
   *  in flight, tagged with the runtime's process tag, until then. */
  confirmsLater?: boolean;
}

/** The spawn_push route (hosts.md "spawn_push"): a driver that continues host sessions with a host CLI. */
export interface SpawnDriver extends DeliveryDriver {
  readonly method: 'spawn_push';
  /** Host labels it has an argv contract for (the engine's eligibility gate reads them). */
  readonly hosts: readonly string[];
  /** Spawning is on in this process (`OPENCOMMS_NO_SPAWN=1` turns it off; the gate still applies). */
  readonly enabled: boolean;
  /** Bounds of the next batch (argv budget), from a size check on the pending mail without draining;
   *  null = nothing may leave now (even the first envelope is too large: it was reported). */
  bounds(rid: string): Promise<DrainOptions | null>;
  /** The runtime it reads state and records errors through. */
  attach(rt: SpawnerRuntime): void;
}

/** What a spawner reads and records through the runtime it serves. */
export interface SpawnerRuntime {
  read(): Promise<State>;
  run(cmd: Command): Promise<ToolResult>;
  env(): Env;
}

type Route = 'own' | 'spawn' | 'cross' | 'cross-retry';

/** What the policy needs from the runtime around it. */
export interface DeliveryHost {
  readonly tag: string;
  now(): number;
  log(line: string): void;
  peek(): Promise<Readonly<State>>;
  /** The state with the channels in this process's focus up to date (Store.focus); the others
   *  may be behind. A process with no focus: `peek`. */
  peekFocus(): Promise<Readonly<State>>;
  read(): Promise<State>;
  run(cmd: Command): Promise<ToolResult>;
  /** One locked engine step (its answer and effects); effects other than the Prompt are run by
   *  the policy. */
  step(cmd: Command): Promise<Pick<Outcome, 'result' | 'effects'> | null>;
  track(p: Promise<unknown>): void;
  /** Whether a process is alive (PID on this computer, lease on another). */
  alive(tag: string): boolean;
  /** The computer this process runs on: only its sessions are looked up, continued or prompted here. */
  readonly machine: string;
}

export class Deliveries {
  private readonly delivering = new Set<string>();
  private readonly redrain = new Set<string>();
  /** Sessions the host reported in this process. */
  private readonly served = new Set<string>();
  /** Recipients this process delivers to without serving them, and by which route. */
  private readonly routes = new Map<string, Exclude<Route, 'own'>>();
  private readonly fallbacks = new Set<NodeJS.Timeout>();
  /** Waits before a commit or requeue is asked again (insist); close ends them at once. */
  private readonly pauses = new Map<NodeJS.Timeout, () => void>();
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private closed = false;

  constructor(
    private readonly rt: DeliveryHost,
    private readonly driver: DeliveryDriver | undefined,
    private readonly spawner: SpawnDriver | undefined,
  ) {}

  get active(): boolean {
    return !!this.driver || !!this.spawner?.enabled;
  }

  close() {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const t of this.fallbacks) clearTimeout(t);
    this.fallbacks.clear();
    for (const [t, resume] of this.pauses) {
      clearTimeout(t);
      resume();
    }
    this.pauses.clear();
  }

  /** Effects of this process's own commands and hand-overs: Wake → notify, ScheduleAt → timer.
   *  `state` is the state the command left, when the caller has it: routing by it needs no read. */
  run(effects: Effect[], state?: Readonly<State>) {
    for (const fx of effects) {
      if (fx.type === 'Wake') for (const rid of fx.recipients) this.rt.track(this.notify(rid, state));
      else if (fx.type === 'ScheduleAt') this.arm(fx.at);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Ownership

  /** The host reports `sid` here (an event, a tool call, a prompt): this process serves it now and
   *  claims it in state unless it already owns it. Another process claiming it later takes it over:
   *  `owns` stops answering true here as soon as the state names a live other owner. */
  async serve(sid: string): Promise<void> {
    this.served.add(sid);
    const state = await this.rt.peek();
    if (onLiveRoster(state, sid) && memberships(state, sid).some(({ m }) => m.owner !== this.rt.tag))
      await this.rt.run({ op: 'claim', session: sid });
  }

  /** Whether the member's session is on this computer (one recorded before computers had ids is). */
  private here(m: { machine: string | null }): boolean {
    return m.machine === null || m.machine === this.rt.machine;
  }

  owns(state: Readonly<State>, rid: string): boolean {
    const d = this.driver;
    if (!d) return false;
    if (d.owns) return d.owns(rid, state);
    if (!this.served.has(rid)) return false;
    return memberships(state, rid).every(
      ({ m }) => m.owner === null || m.owner === this.rt.tag || !this.rt.alive(m.owner),
    );
  }

  /**
   * Start-up roster check (protocol.md "OpenCode plugin"): every member of `hosts` on this computer that
   * works in this checkout (`memberWorktree`) is looked up in the host, whichever computer made its
   * channel (another computer's or another clone's sessions are not this host's to judge).
   * Gone → marked stale and reported, never replaced; a failed lookup → reported; alive and
   * ownerless (its process is gone) → this process serves it until its own process claims it back.
   */
  async reconcile(o: {
    hosts: ReadonlySet<string>;
    worktree: string;
    label: string;
    lookup(hostSessionId: string): Promise<'alive' | 'gone' | { error: string }>;
  }) {
    // A copy: the walk awaits the host between rows, and the live state changes in place.
    const state = await this.rt.read();
    for (const ch of Object.values(state.channels)) {
      if (ch.lifecycle !== 'active') continue;
      for (const m of ch.members) {
        if (!o.hosts.has(m.host) || !this.here(m) || memberWorktree(ch, m) !== o.worktree) continue;
        const id = m.host_session_id ?? m.session_id;
        const r = await o.lookup(id);
        const entry = (message: string) => ({
          op: 'record_error' as const,
          entry: { at: this.rt.now(), message, channel_id: ch.id, session_id: m.session_id },
        });
        if (r === 'gone') {
          await this.rt.run({ op: 'mark_stale', session: m.session_id });
          await this.rt.run(
            entry(`${o.label} session ${id} (${m.role} on "${ch.name}") vanished; marked stale, not replaced.`),
          );
        } else if (r !== 'alive') await this.rt.run(entry(`Could not look up ${o.label} session ${id}: ${r.error}`));
        else if (!m.owner || !this.rt.alive(m.owner)) await this.serve(m.session_id);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Routes

  /** New mail for `rid` queued by this process (send, kick notice, resume, sweep). */
  async notify(rid: string, known?: Readonly<State>): Promise<void> {
    // Without a driver or a spawner no route below can deliver: skip the state read.
    if (this.closed || !this.active) return;
    const state = known ?? (await this.rt.peek());
    if (this.owns(state, rid)) return this.deliver(rid, 'own');
    const rows = memberships(state, rid).map(({ m }) => m);
    if (this.spawner?.enabled && rows.some((m) => spawnEligible(m, this.spawner!.hosts) && this.here(m))) {
      this.routes.set(rid, 'spawn');
      return this.deliver(rid, 'spawn');
    }
    if (this.driver?.crossServer && rows.some((m) => m.delivery_mode === 'push' && this.here(m))) this.fallback(rid);
  }

  /** Whether the cross-server fallback may prompt `rid` from here: a push session of this computer
   *  that no live process serves. Another computer's session is not in this computer's host: a prompt
   *  there fails, and each failure counts an attempt until the mail is dead-lettered, while its own
   *  computer would deliver it on its return. */
  private crossable(state: Readonly<State>, rid: string): boolean {
    const rows = memberships(state, rid).map(({ m }) => m);
    return (
      rows.some((m) => m.delivery_mode === 'push' && this.here(m)) &&
      !rows.some((m) => m.owner && this.rt.alive(m.owner))
    );
  }

  /** After the delay (protocol.md "Owner-side delivery"), if the mail still waits, nobody alive owns the session and the host
   *  does not report it busy, deliver it from here. */
  private fallback(rid: string) {
    const t = setTimeout(() => {
      this.fallbacks.delete(t);
      this.rt.track(
        (async () => {
          const state = await this.rt.peek();
          if (!(state.queues[rid] ?? []).length || !this.crossable(state, rid)) return;
          if ((await this.driver!.hold?.(rid)) === 'busy') return;
          await this.deliver(rid, 'cross');
        })(),
      );
    }, CROSS_SERVER_FALLBACK_MS);
    t.unref?.();
    this.fallbacks.add(t);
  }

  /** Drains a recipient this process owns, now (a host idle event, a re-check). */
  wake(rid: string) {
    this.rt.track(
      this.rt.peek().then((state) => {
        if (this.owns(state, rid)) return this.deliver(rid, 'own');
      }),
    );
  }

  /** The in-flight guard: one drain/hand-over cycle per recipient at a time; a wake meanwhile
   *  re-drains once the cycle ends. */
  deliver(rid: string, route: Route): Promise<void> {
    if (this.closed || !(route === 'spawn' ? this.spawner : this.driver)) return Promise.resolve();
    if (this.delivering.has(rid)) {
      this.redrain.add(rid);
      return Promise.resolve();
    }
    const p = this.cycle(rid, route);
    this.rt.track(p);
    return p;
  }

  private async cycle(rid: string, route: Route): Promise<void> {
    this.delivering.add(rid);
    try {
      do {
        this.redrain.delete(rid);
        const via = route === 'spawn' ? this.spawner! : this.driver!;
        const opts: DrainOptions | null =
          route === 'spawn'
            ? await this.spawner!.bounds(rid)
            : { hold: (await via.hold?.(rid)) ?? null, maxSize: via.maxSize };
        if (!opts) break;
        const res = await this.rt.step({ op: 'drain', rid, opts });
        if (res) this.run(res.effects);
        const prompt = res?.effects.find((e): e is Extract<Effect, { type: 'Prompt' }> => e.type === 'Prompt');
        if (prompt) await this.handOver(prompt, via, route);
      } while (this.redrain.has(rid) && !this.closed);
    } finally {
      this.delivering.delete(rid);
    }
  }

  private async handOver(fx: Extract<Effect, { type: 'Prompt' }>, via: DeliveryDriver, route: Route) {
    const held = { by: this.rt.tag, attempts: fx.attempts };
    try {
      await via.deliver(fx.recipient, fx.text, fx.message_ids, fx.redelivery);
    } catch (e) {
      const error = String((e as Error).message ?? e);
      await this.insist({ op: 'requeue', rid: fx.recipient, message_ids: fx.message_ids, error, held });
      // A failed cross-server hand-over gets ONE retry with the same allowance.
      if (route === 'cross') this.routes.set(fx.recipient, 'cross-retry');
      return;
    }
    if (via.confirmsLater) return;
    await this.insist({ op: 'commit', rid: fx.recipient, message_ids: fx.message_ids, method: via.method, held });
  }

  /** The step that ends a hand-over (its commit, or the requeue of a failed one) must hold: until
   *  it does, the batch stays in flight, held by this live process, so nobody else takes it and the
   *  member's mail stops. A step the store refused (logged by `step`) is asked again every
   *  DELIVERY_RETRY_MS until it holds or this process closes (the batch is then a sweep's). */
  private async insist(cmd: Command) {
    for (;;) {
      const out = await this.rt.step(cmd);
      if (out) return this.run(out.effects);
      if (this.closed) return;
      await new Promise<void>((resume) => {
        const t = setTimeout(() => {
          this.pauses.delete(t);
          resume();
        }, DELIVERY_RETRY_MS);
        this.pauses.set(t, resume);
      });
      if (this.closed) return;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Scans and timers

  /** Delivers everything due for the recipients this process owns or routes, and re-arms the timer. */
  async scan(): Promise<void> {
    if (this.closed || !this.active) return;
    // The live state, not a copy: everything below reads it before its first await.
    let state: Readonly<State>;
    try {
      // Its sessions' channels are its focus: whatever else is behind, each hand-over's
      // drain brings its own channel up to date.
      state = await this.rt.peekFocus();
    } catch (e) {
      this.rt.log(`scan: ${(e as Error).message}`);
      return;
    }
    const pending = new Set(pendingRecipients(state));
    const local = [...pending].filter((rid) => this.owns(state, rid));
    for (const rid of local) void this.deliver(rid, 'own');
    const now = this.rt.now();
    for (const [rid, route] of this.routes) {
      if (!pending.has(rid)) {
        this.routes.delete(rid);
        continue;
      }
      if (route === 'spawn') void this.deliver(rid, 'spawn');
      else if (!this.crossable(state, rid)) this.routes.delete(rid);
      else if (memberships(state, rid).every(({ ch }) => (ch.retry_at[rid] ?? 0) <= now)) {
        this.routes.delete(rid);
        void this.deliver(rid, 'cross-retry');
      }
    }
    const due = nextDue(state, [...local, ...this.routes.keys()], { now, spawnHosts: this.spawner?.hosts });
    if (due !== null) this.arm(due);
  }

  arm(at: number) {
    if (this.closed || !this.active || at >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.timerAt = Infinity;
        void this.scan();
      },
      Math.max(0, at - this.rt.now()),
    );
    this.timer.unref?.();
  }
}
