// The imperative shell around the engine: lock → load → engine → save → unlock → effects, and the
// wake on the store's subscription that lets an owner process deliver mail another process queued. Who gets mail
// when, by which route, is the delivery policy's (delivery.ts). A Runtime owns no state the file
// does not hold (caches aside).
import { channelNamed } from '../engine/lookup.ts';
import { commandScope } from '../engine/scope.ts';
import { raw } from '../protocol/draft.ts';
import { apply, compactContext, plan, type Command, type Env, type Outcome } from '../engine/index.ts';
import { newChannelId, newCorrelationId, newMessageId } from '../protocol/ids.ts';
import { refuse, RefusalError, type Refusal, type ToolResult } from '../protocol/result.ts';
import type { SessionsState, State } from '../protocol/schema.ts';
import { getSession, listSessions } from '../engine/operator.ts';
import { sessionsOf } from '../engine/deliveries.ts';
import { openStore, type Store, type Subscription } from '../store/index.ts';
import { isArchiveId } from '../protocol/ids.ts';
import { archiveNamed, type Archive, type ArchiveHead } from '../protocol/archive.ts';
import {
  DELIVERY_VIEW_LOGGED,
  CATCH_UP_IDLE_MAX_MS,
  CATCH_UP_IDLE_MS,
  CATCH_UP_QUIET_MS,
  HISTORY_READ_MAX,
} from './limits.ts';
import { Deliveries, type DeliveryDriver, type DeliveryHost, type SpawnDriver } from './delivery.ts';
import { unwritableStore } from './faults.ts';
import { machineId } from './machine.ts';
import { parseTag, processAlive, processTag } from './process.ts';
import { LeaseKeeper } from './lease.ts';
import { MAX_ARCHIVE_MESSAGES, PARENT_SCAN_LINES } from '../protocol/limits.ts';

export type { DeliveryDriver, SpawnDriver } from './delivery.ts';
export { processAlive, processTag } from './process.ts';
export { machineId } from './machine.ts';

export interface RuntimeOptions {
  /** Hands batches to the host sessions this process serves (push, wake). */
  driver?: DeliveryDriver;
  /** Continues spawn_push members' host sessions with a host CLI (section 8.4). */
  spawn?: SpawnDriver;
  /** Host labels whose host sessions can be continued, for the stale rule (section 1.1) where no spawner runs. */
  spawnHosts?: readonly string[];
  /** Subscribe to the store and drain local recipients when another process queues mail. */
  deliverOnChange?: boolean;
  /** A long-lived process whose calls come and go (the MCP server): while it waits for its next
   *  call it applies what other processes wrote, every CATCH_UP_IDLE_MS at first and then less
   *  often, so that a call after a pause does not wait for the pause's writes (a pull of 100
   *  after another server's 100 sends spent ~2–4 ms replaying them). On a timer, not on every
   *  write through a subscription, which would wake every server of a project on every write,
   *  servers that may never be called included (docs/performance.md). */
  catchUpWhileIdle?: boolean;
  now?: () => number;
  log?: (line: string) => void;
  /** The process tag in-flight batches are held under (default this process). A Claude Code wake
   *  waiter holds them under the Claude Code process, which outlives it. */
  tag?: string;
}

/** A start-up sweep that meets a busy lock (5 s each) is retried this often before giving up:
 *  a stuck holder is broken as stale within that time. */
const START_SWEEP_ATTEMPTS = 3;

/** Operations that never change state. */
const READ_ONLY = new Set<Command['op']>([
  'status',
  'operator_status',
  'inbox',
  'history',
  'archive',
  'read_state',
  'deliveries',
]);

type SessionRead = Extract<Command, { op: 'session_list' | 'session_get' }>;

/** What a locked engine step hands back to the shell. */
type Answer = Pick<Outcome, 'result' | 'effects'>;

/** An adapter's pre-check on the current state (its identity or roster rule). */
type Gate = (state: Readonly<State>) => Refusal | null;

const mint = (prefix: 'ocm' | 'chn' | 'cor') =>
  prefix === 'ocm' ? newMessageId() : prefix === 'chn' ? newChannelId() : newCorrelationId();

export class Runtime {
  private subscription: Subscription | null = null;
  private idle: NodeJS.Timeout | null = null;
  /** Calls in progress: a process catching up while idle is not idle while one runs. */
  private running = 0;
  private closed = false;
  /** This process's lease, when the store is shared by computers (started by `start`). */
  private lease: LeaseKeeper | null = null;
  private readonly now: () => number;
  private readonly log: (line: string) => void;
  readonly tag: string;
  readonly deliveries: Deliveries;
  /** Settles when every effect started so far has finished (tests, graceful shutdown). */
  private inflight = new Set<Promise<unknown>>();

  constructor(
    readonly store: Store,
    private readonly opts: RuntimeOptions = {},
  ) {
    this.now = opts.now ?? Date.now;
    this.log = opts.log ?? ((line) => process.stderr.write(`[opencomms] ${line}\n`));
    this.tag = opts.tag ?? processTag();
    const host: DeliveryHost = {
      tag: this.tag,
      now: this.now,
      log: this.log,
      peek: () => this.store.peek(),
      peekFocus: () => this.store.peek('focus'),
      read: () => this.store.read(),
      run: (cmd) => this.run(cmd),
      step: (cmd) => this.step(cmd),
      track: (p) => this.track(p),
      alive: (tag) => this.alive()(tag),
      machine: this.machine,
    };
    this.deliveries = new Deliveries(host, opts.driver, opts.spawn);
    opts.spawn?.attach({ read: () => this.store.read(), run: (cmd) => this.run(cmd), env: () => this.env() });
  }

  env(): Env {
    return {
      now: this.now(),
      by: this.tag,
      machine: this.machine,
      mint,
      spawnHosts: this.opts.spawn?.hosts ?? this.opts.spawnHosts,
    };
  }

  /** Whether a process is alive: by PID on this computer; on another, by the last lease snapshot
   *  when this process keeps a lease, else assumed alive (a store one computer uses). */
  alive(): (tag: string) => boolean {
    return this.lease?.alive() ?? processAlive;
  }

  /** The computer of this runtime's tag (a Claude Code waiter's tag names the Claude Code process). */
  get machine(): string {
    return parseTag(this.tag).machine ?? machineId();
  }

  /** Start-up: take a lease when the store is shared by computers, sweep the in-flight mail of dead
   *  processes, then subscribe and deliver what is due. */
  async start(): Promise<void> {
    if (this.store.leases) {
      this.lease = new LeaseKeeper(this.store.leases, this.tag, this.machine, {
        peek: () => this.store.peek(),
        sweep: async (alive) => {
          const r = await this.run({ op: 'sweep', alive });
          if (!r.ok) this.log(`lease sweep failed: ${r.message}`);
        },
        log: this.log,
      });
      await this.lease.start();
    }
    // The sweep must happen before this process delivers anything: a busy lock is waited out.
    for (let attempt = 1; ; attempt++) {
      const r = await this.run({ op: 'sweep', alive: this.alive() });
      if (
        r.ok ||
        (r.data as { reason?: string } | undefined)?.reason !== 'state_busy' ||
        attempt >= START_SWEEP_ATTEMPTS
      ) {
        if (!r.ok) this.log(`start-up sweep failed: ${r.message}`);
        break;
      }
    }
    if (this.opts.deliverOnChange && this.opts.driver)
      this.subscription = await this.store.subscribe(() => this.scan(), this.log);
    await this.lease?.check();
    await this.scan();
    this.catchUpIn(CATCH_UP_IDLE_MS);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.idle) clearTimeout(this.idle);
    this.deliveries.close();
    await this.subscription?.close();
    await this.settled();
    await this.lease?.close();
    await this.store.close();
  }

  /** Waits until effects started so far (prompts, commits, re-drains) are done. */
  async settled(): Promise<void> {
    while (this.inflight.size) await Promise.allSettled([...this.inflight]);
  }

  /** One command as a ToolResult: refusals and faults are data, never a throw. `gate` is an
   *  adapter's pre-check on the current state (its identity or roster rule); a state that cannot
   *  be read (incompatible, unreadable, busy) is a refusal there too, not a fault. */
  async run(cmd: Command, gate?: Gate): Promise<ToolResult> {
    this.running++;
    try {
      // A look at the state outside the lock meets the gate: a read's, and the one a preparation
      // takes before it reads history or archives (a refused caller costs no such read). A
      // command that changes state meets it again under the lock, on the state it changes (no
      // window between the check and the change, and no look of its own before the lock).
      const look = async () => {
        const state = await this.store.peek();
        const refusal = gate?.(state);
        if (refusal) throw new RefusalError(refusal);
        return state;
      };
      if (cmd.op === 'session_list' || cmd.op === 'session_get')
        return await this.readSessions(
          cmd,
          async () => (gate ? null : await this.store.sessions?.()) ?? sessionsOf(await look()),
        );
      const prepared = await this.prepare(cmd, look);
      // Reads take no lock: rename is atomic, so a lock-free read never sees a half-written file.
      if (READ_ONLY.has(cmd.op)) return apply((await look()) as State, prepared, this.env()).result;
      const out = await this.mutate(prepared, gate);
      if (!this.closed) this.deliveries.run(out.effects, out.state);
      return out.result;
    } catch (e) {
      if (e instanceof RefusalError) return e.refusal;
      return unwritableStore(e, this.store.location) ?? this.internalError(cmd.op, e);
    } finally {
      this.running--;
      this.catchUpIn(CATCH_UP_IDLE_MS);
    }
  }

  /** (Re)starts the catch-ups of a process catching up while idle, after a call: during the first
   *  CATCH_UP_QUIET_MS of quiet, CATCH_UP_IDLE_MS after one that applied something and twice the
   *  last wait after one that found nothing (so a server beside a quiet project wakes a few times,
   *  not a hundred, and one beside busy writers keeps up with them); then every
   *  CATCH_UP_IDLE_MAX_MS. None while a call runs
   *  (the call catches up itself, and its end starts them again). A state that cannot be read now
   *  is not logged here: the next call meets it and answers with the refusal. */
  private catchUpIn(ms: number, quietSince = Date.now()) {
    if (!this.opts.catchUpWhileIdle || this.closed) return;
    if (this.idle) clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      this.idle = null;
      if (this.running) return;
      void this.store
        .catchUp()
        .catch(() => false)
        .then((news) =>
          this.catchUpIn(
            Date.now() - quietSince >= CATCH_UP_QUIET_MS
              ? CATCH_UP_IDLE_MAX_MS
              : news
                ? CATCH_UP_IDLE_MS
                : Math.min(ms * 2, CATCH_UP_IDLE_MAX_MS),
            quietSince,
          ),
        );
    }, ms);
    this.idle.unref?.();
  }

  /** An unexpected fault answers `internal_error`; its details go to the log and to
   *  `state.errors` like every other failure, never into the message. */
  private async internalError(op: string, e: unknown): Promise<Refusal> {
    const detail = e instanceof Error ? e.message : String(e);
    this.log(`internal error in ${op}: ${e instanceof Error ? (e.stack ?? detail) : detail}`);
    if (op !== 'record_error') {
      const entry = { at: this.now(), reason: 'internal_error', message: `Internal error in ${op}: ${detail}` };
      await this.mutate({ op: 'record_error', entry }).catch((err: unknown) =>
        this.log(`could not record the internal error: ${err instanceof Error ? err.message : String(err)}`),
      );
    }
    return refuse('internal_error', 'Unexpected fault (logged). Retry once, then report it.');
  }

  /** Reads that belong outside the lock: history logs and archives are append-only or immutable.
   *  `look` is the state as the gate lets the caller see it: every case takes it before it reads. */
  private async prepare(cmd: Command, look: () => Promise<Readonly<State>>): Promise<Command> {
    switch (cmd.op) {
      case 'send': {
        const id = cmd.args.reply_to;
        if (typeof id !== 'string' || !id) return cmd;
        const state = await look();
        if (state.messages[id]) return cmd;
        const ch = channelNamed(state, cmd.args.channel);
        const parent = ch && (await this.store.findInHistory(ch.id, id, PARENT_SCAN_LINES));
        return parent ? { ...cmd, parent } : cmd;
      }
      case 'join': {
        // Joiners of a restored channel get the archive's compact context, never its messages.
        const ch = channelNamed(await look(), cmd.args.channel);
        const archive = ch?.parent_channel_id ? await this.store.archive(ch.parent_channel_id) : null;
        return archive ? { ...cmd, compact_context: compactContext(archive) } : cmd;
      }
      case 'history': {
        const ch = channelNamed(await look(), cmd.args.channel);
        return ch ? { ...cmd, logged: await this.store.history(ch.id, HISTORY_READ_MAX) } : cmd;
      }
      case 'save_session': {
        const ch = channelNamed(await look(), cmd.args.channel);
        if (!ch) return cmd;
        const [logged, loggedIds] = await Promise.all([
          this.store.history(ch.id, MAX_ARCHIVE_MESSAGES),
          this.store.historyIds(ch.id),
        ]);
        return { ...cmd, logged, loggedIds };
      }
      case 'resume_session':
      case 'delete_session':
        await look();
        return { ...cmd, archive: await this.archiveFor(cmd.args.channel) };
      case 'deliveries': {
        const ch = channelNamed(await look(), cmd.args.channel);
        return ch ? { ...cmd, logged: await this.store.history(ch.id, DELIVERY_VIEW_LOGGED) } : cmd;
      }
      case 'archive': {
        await look();
        if (cmd.args.mode === undefined || cmd.args.mode === 'list' || cmd.args.mode === '' || cmd.args.mode === null)
          return { ...cmd, archives: (await this.store.archives()).archives };
        return { ...cmd, archive: await this.archiveFor(cmd.args.channel) };
      }
      default:
        return cmd;
    }
  }

  /** The session reads: from what they show (the store's sessions index, where it keeps one)
   *  when no gate needs the whole state, and archive heads only (what a channel card or a saved
   *  session's detail shows; never an archive's messages). */
  private async readSessions(cmd: SessionRead, look: () => Promise<SessionsState>): Promise<ToolResult> {
    const state = await look();
    const heads = (await this.store.archives()).archives;
    if (cmd.op === 'session_list') return listSessions(state, heads);
    // A live channel shows the compact context of the archive it was restored from.
    const ch = channelNamed(state, cmd.args.channel);
    let head: ArchiveHead | undefined;
    if (ch?.lifecycle === 'active') head = heads.find((h) => h.channel_id === ch.parent_channel_id);
    else {
      const key = typeof cmd.args.channel === 'string' ? cmd.args.channel.trim() : '';
      if (key) head = isArchiveId(key) ? heads.find((h) => h.channel_id === key) : archiveNamed(heads, key);
    }
    return getSession(state, cmd.args, head ?? null);
  }

  private async archiveFor(raw: unknown): Promise<Archive | null> {
    if (typeof raw !== 'string' || !raw.trim()) return null;
    const key = raw.trim();
    return isArchiveId(key) ? this.store.archive(key) : this.store.archiveByName(key);
  }

  /** A lock-free read of the current state (a private copy). */
  read(): Promise<State> {
    return this.store.read();
  }

  /** A lock-free, copy-free look at the current state: read-only (gates, hooks, status). */
  peek(): Promise<Readonly<State>> {
    return this.store.peek();
  }

  private track<T>(p: Promise<T>): void {
    const t = p
      .catch((e) => this.log(`effect failed: ${(e as Error).stack ?? e}`))
      .finally(() => this.inflight.delete(t));
    this.inflight.add(t);
  }

  /** The host reports this session in this process (see Deliveries.serve). */
  serve(sid: string): Promise<void> {
    return this.deliveries.serve(sid);
  }

  /** Drains a recipient this process owns, now (an idle event, a re-check). */
  wake(rid: string) {
    if (!this.closed) this.deliveries.wake(rid);
  }

  /** Delivers everything due for the recipients this process owns or routes. */
  scan(): Promise<void> {
    return this.closed ? Promise.resolve() : this.deliveries.scan();
  }

  /** One locked engine step: the store writes what the outcome asks for, then saves. The answer
   *  and the effects come back out, with a read-only look at the state as the step left it (the
   *  store's live object): what the effects are routed by, with no catch-up of their own. */
  private async mutate(cmd: Command, gate?: Gate): Promise<Answer & { state: Readonly<State> }> {
    // Kept beside the result, not in it: the store copies what a mutation returns.
    let state!: Readonly<State>;
    const answer = await this.store.mutate((draft) => {
      state = raw(draft);
      const refusal = gate?.(state);
      if (refusal) return { changed: false, result: { result: refusal, effects: [] } };
      const env = this.env();
      const planned = plan(state, cmd, env);
      if (planned)
        return {
          changed: planned.ops.length > 0,
          ops: planned.ops,
          result: { result: planned.result, effects: planned.effects },
        };
      const o = apply(draft, cmd, env);
      const w = o.writes;
      return {
        changed: o.changed,
        result: { result: o.result, effects: o.effects },
        history: w?.history,
        archive: w?.archive,
        deleteArchive: w?.deleteArchive,
        deleteHistory: w?.deleteHistory,
      };
    }, commandScope(cmd));
    return { ...answer, state };
  }

  /** One locked engine step for the delivery policy: the answer, or null (logged) on a fault. */
  private async step(cmd: Command): Promise<Answer | null> {
    try {
      return await this.mutate(cmd);
    } catch (e) {
      this.log(`${cmd.op} failed: ${e instanceof RefusalError ? e.refusal.message : ((e as Error).stack ?? e)}`);
      return null;
    }
  }
}

/** The edge's way to a runtime: the store the project is bound to (the files by default). */
export const openRuntime = (projectDir: string, opts?: RuntimeOptions): Runtime =>
  new Runtime(openStore(projectDir), opts);
