// The store on PostgreSQL: one project = one schema = one total order of changes. A process keeps
// the state as one live object (as the file store does) and the sequence number of the last
// change it applied. A mutation runs on that object through the change tracker, checks what it
// wrote, and commits it in one statement against the head it holds (schema.ts `commit`): when
// another process committed first, the statement returns those changes instead; they are applied
// and the mutation runs again on the state they make (the engine is pure, so running it again is
// what it would have done had it come later). Reads catch up first (one query); the background
// catch-up queries only when a notification, a reconnect or the backstop says there is news.
//
// Focus: a call scoped to one channel (Store.mutate's scope: a send, a pull, a hand-over) needs
// that channel current and nothing of the others. That channel is then in the process's focus:
// it applies the changes of the channels in its focus and of no one channel, and learns only the
// sequence numbers of the rest (their ops never leave the server), and its scoped commits are
// ordered after the changes it must see only. Every change up to `full` is applied; after it, a
// change of a channel out of focus is not (and none of no one channel lies there: one is applied
// only once the cache is whole). A call that is not scoped first fetches what was left out.
import pg from './pg.ts';
import type { Archive, ArchiveHead } from '../../protocol/archive.ts';
import { ArchiveSchema } from '../../protocol/archive.ts';
import { applyOps, detach, raw, type Op } from '../../protocol/draft.ts';
import { isArchiveId } from '../../protocol/ids.ts';
import { RefusalError, refuse } from '../../protocol/result.ts';
import { emptyState, type Envelope, type State } from '../../protocol/schema.ts';
import type { InvalidFile, MutateOutcome, Scope, Store, Subscription, StoreChange } from '../types.ts';
import { checkedChanges, opsWithin, runOnDraft } from '../mutation.ts';
import { checkOps } from '../validate.ts';
import { asRefusal, clientConfig, describeUrl, isConnectionError, retired } from './connect.ts';
import {
  PG_BACKSTOP_MS,
  PG_COMPACTED_RELOADS,
  PG_HEARD_FRESH_MS,
  PG_IN_DOUBT_MS,
  PG_OPTIMISTIC_TRIES,
  reconnectDelayMs,
  PG_SNAPSHOT_EVERY,
  PG_SNAPSHOT_PIECE_CHARS,
} from './limits.ts';
import { jsonPieces } from './json-pieces.ts';
import { Listener } from './listen.ts';
import { PgLeases } from './leases.ts';
import { Mailbox } from './mailbox.ts';
import {
  PG_LAYOUT,
  concernsFocus,
  fillMailboxSql,
  historyBatches,
  historyEnvelopes,
  ident,
  layoutSql,
  loadSelects,
  loadSql,
  schemaOf,
} from './schema.ts';

export interface PgStoreOptions {
  /** postgres://user@host:port/database (a password only from the environment). */
  url: string;
  /** The project key: the schema `oc_<key>` holds the project. */
  key: string;
  /** Changes between snapshots; tests make it small. */
  snapshotEvery?: number;
  /** How long a commit whose answer was lost waits to learn its outcome (PG_IN_DOUBT_MS); tests make it small. */
  inDoubtMs?: number;
  env?: NodeJS.ProcessEnv;
}

export interface PgStatus {
  server_version: string;
  head: number;
  lag: number;
  cold_start_changes: number;
  connections: number;
}

interface Cache {
  state: State;
  seq: number;
  /** Every change up to here is applied; after it, only those of channels in focus. */
  full: number;
  /** The mailbox rows at `seq` (mailbox.ts); null while a cold load replays its tail. */
  box: Mailbox | null;
}

/** A change ready to commit: its statement, its ops as sent, and how to take it back out of the cache. */
interface Prepared {
  query: pg.QueryConfig;
  ops: string;
  undo: () => void;
  /** The channel the change concerns (null: any). */
  channel: string | null;
}

interface CommitRow {
  o_seq: string;
  o_ops: Op[] | null;
  o_archives: boolean;
  o_channel: string | null;
  o_mine: boolean;
}

/** A change as a query answers it: no ops for one of a channel out of this process's focus. */
interface ChangeRow {
  seq: string;
  ops: Op[] | null;
  archives: boolean;
  channel: string | null;
}

/** What a catch-up needs: every change applied, or those of the channels in focus. */
type Need = 'all' | 'focus';

/** `q` with its values written in as literals: one simple query may then hold more statements (a
 *  query with parameters is one statement). */
function literally(q: pg.QueryConfig): string {
  return q.text.replace(/\$(\d+)/g, (_, n: string) => literal(q.values![Number(n) - 1]));
}

/** A value as an SQL literal (an array of numbers as int[], of anything else as text[]). */
function literal(v: unknown): string {
  return v === null || v === undefined
    ? 'null'
    : typeof v === 'number'
      ? String(v)
      : Array.isArray(v)
        ? `array[${v.map(literal).join(',')}]::${typeof v[0] === 'number' ? 'int' : 'text'}[]`
        : pg.escapeLiteral(String(v));
}

/** `q` as one simple query that ends the transaction too, then COMMIT. */
const withCommit = (q: pg.QueryConfig): string => `${literally(q)}; commit;`;

export class PgStore implements Store {
  readonly location: string;
  readonly key: string;
  private readonly schema: string;
  private readonly config: pg.ClientConfig;
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  private cache: Cache | null = null;
  /** Every access to the cache, one at a time in call order (a commit in flight holds it). */
  private tail: Promise<unknown> = Promise.resolve();
  private readonly listener: Listener;
  /** When this process last asked the server what is new (the backstop counts from it). */
  private lastAsked = 0;
  /** The head as the last lease renewal read it. */
  private heard: { seq: number; at: number } | null = null;
  private closed = false;
  /** The snapshot being written (`snapshot`). */
  private snapshotting: Promise<unknown> | null = null;
  /** Other processes write too: an optimistic try lost, and every locked run since found some of
   *  their changes before its own (mutate). */
  private contended = false;
  /** Liveness of processes on other machines (leases.ts). */
  readonly leases: PgLeases;
  /** The channels this process keeps current (see "Focus"). */
  private readonly focused = new Set<string>();
  /** The channels this process serves, as `focus` was told to select them. */
  private select: ((state: Readonly<State>) => readonly string[]) | null = null;

  constructor(private readonly options: PgStoreOptions) {
    this.schema = schemaOf(options.key);
    this.key = options.key;
    this.config = clientConfig(options.url, options.env);
    this.location = `${describeUrl(options.url)}#${options.key}`;
    this.listener = new Listener(this.config, this.schema);
    this.listener.concerns = (channel) => !this.focused.size || this.focused.has(channel);
    this.leases = new PgLeases(
      (q) => this.query(q),
      this.schema,
      (seq) => {
        this.heard = { seq, at: Date.now() };
        this.listener.heard(seq);
      },
    );
  }

  // ---- the connection --------------------------------------------------------------------------

  private async connection(): Promise<pg.Client> {
    if (this.closed) throw new RefusalError(refuse('state_unreadable', `The store ${this.location} was closed.`));
    if (this.client) return this.client;
    this.connecting ??= this.connect().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async connect(): Promise<pg.Client> {
    const c = new pg.Client(this.config);
    // A connection that fails later is dropped; the next call connects again.
    c.on('error', () => {
      if (this.client === c) this.client = null;
    });
    try {
      await c.connect();
      await this.ensureLayout(c);
    } catch (e) {
      void c.end().catch(() => {});
      throw asRefusal(e, this.location);
    }
    this.client = c;
    return c;
  }

  /** Creates the project's schema on first use, upgrades one laid out by an older OpenComms and
   *  refuses one laid out by a newer one. */
  private async ensureLayout(c: pg.Client) {
    let layout = (await this.layoutOf(c)) ?? (await this.create(c));
    if (layout < PG_LAYOUT) {
      await this.upgrade(c);
      layout = PG_LAYOUT;
    }
    if (layout > PG_LAYOUT)
      throw new RefusalError(
        refuse(
          'state_incompatible',
          `The project ${this.key} at ${describeUrl(this.options.url)} was laid out by a newer OpenComms (layout ${layout}, this one knows ${PG_LAYOUT}): upgrade OpenComms on this computer.`,
        ),
      );
  }

  private async layoutOf(c: pg.Client): Promise<number | null> {
    const found = await c
      .query<{ layout: number | null }>(`select (select layout from ${ident(this.schema)}.meta limit 1) as layout`)
      .catch(() => null);
    return found?.rows[0]?.layout ?? null;
  }

  /** Lays the project out, holding an advisory lock that serialises this across processes; the
   *  layout found when another process laid it out while this one waited for the lock (laying it
   *  out again would alter tables that process already uses). */
  private async create(c: pg.Client): Promise<number> {
    try {
      await c.query(`begin; select pg_advisory_xact_lock(hashtext('opencomms:${this.schema}'))`);
      // A failed statement would end the transaction: the table is looked up, not read.
      const meta = await c.query<{ laid: boolean }>(
        `select to_regclass('${ident(this.schema)}.meta') is not null as laid`,
      );
      const found = meta.rows[0]!.laid ? await this.layoutOf(c) : null;
      if (found === null) await c.query(layoutSql(this.schema));
      await c.query('commit');
      return found ?? PG_LAYOUT;
    } catch (e) {
      await c.query('rollback').catch(() => {});
      throw e;
    }
  }

  /** A project laid out by an older OpenComms, brought to this layout holding the head's lock,
   *  so that no change commits meanwhile: layoutSql creates what is missing and converts the
   *  snapshots (layout 3: json, in pieces), the history rows become batches, and the mailbox
   *  (none in layout 1, a row in one column in layout 2) is filled from the state at the head. */
  private async upgrade(c: pg.Client) {
    const s = ident(this.schema);
    try {
      await c.query(
        `begin; select pg_advisory_xact_lock(hashtext('opencomms:${this.schema}')); select seq from ${s}.head for update;`,
      );
      const done = await c.query<{ layout: number }>(`select layout from ${s}.meta`);
      const from = done.rows[0]?.layout ?? 0;
      if (from < 3) {
        // Layout 1 had no mailbox, layout 2 one with each row whole: laid out again, filled below.
        // Both had a history row per envelope: each becomes a batch of one, in order.
        await c.query(`drop table if exists ${s}.mailbox;
          alter table ${s}.history rename to history_2; alter index ${s}.history_channel rename to history_2_channel;`);
        await c.query(layoutSql(this.schema));
        await c.query(`insert into ${s}.history (channel_id, message_ids, envelopes)
          select channel_id, array[message_id], json_build_array(envelope) from ${s}.history_2 order by n;
          drop table ${s}.history_2;`);
        await this.fillMailbox(c);
      }
      // Layout 3 named no channel per change: each of its changes concerns any (null).
      if (from < PG_LAYOUT) {
        await c.query(layoutSql(this.schema));
        await c.query(`update ${s}.meta set layout = ${PG_LAYOUT}`);
      }
      await c.query('commit');
    } catch (e) {
      await c.query('rollback').catch(() => {});
      throw e;
    }
  }

  private async fillMailbox(c: pg.Client) {
    const [head, changes] = (await c.query(loadSelects(this.schema))) as unknown as pg.QueryResult[];
    const snap = head!.rows[0] as { state: State; seq: string } | undefined;
    const seq = Number(snap?.seq ?? 0);
    const cache: Cache = { state: snap?.state ?? emptyState(), seq, full: seq, box: null };
    if (this.applyRows(cache, changes!.rows as ChangeRow[]) !== true)
      throw new Error(`the changes of ${this.location} do not follow its snapshot`);
    const rows = [...Mailbox.of(cache.state).rows.values()];
    await c.query({ text: fillMailboxSql(this.schema), values: [JSON.stringify(rows)] });
  }

  private async query<R extends pg.QueryResultRow>(q: pg.QueryConfig | string): Promise<pg.QueryResult<R>> {
    const c = await this.connection();
    try {
      return await c.query<R>(q as pg.QueryConfig);
    } catch (e) {
      this.dropBroken(c, e);
      throw asRefusal(e, this.location);
    }
  }

  /** A transport failure: the next call connects again. */
  private dropBroken(c: pg.Client, e: unknown) {
    if (this.client === c && !(e as { code?: string }).code?.match(/^[0-9A-Z]{5}$/)) {
      this.client = null;
      void c.end().catch(() => {});
    }
  }

  /** One access to the cache at a time, in call order. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn);
    this.tail = run.catch(() => {});
    return run;
  }

  // ---- reading ---------------------------------------------------------------------------------

  async read(): Promise<State> {
    return structuredClone(await this.peek());
  }

  peek(scope?: Scope | 'focus'): Promise<Readonly<State>> {
    return this.serial(async () => {
      if (scope === undefined || !this.focused.size || (scope === 'focus' && !this.select)) return this.current();
      if (!this.cache) await this.load();
      const key = scope === 'focus' ? '' : await this.scoped(scope);
      if (key === null) return this.current();
      await this.news(false, 'focus');
      if (this.select) await this.refocus();
      return this.cache!.state;
    });
  }

  focus(select: (state: Readonly<State>) => readonly string[]): void {
    this.select = select;
    this.listener.filtering = true;
    void this.serial(async () => {
      if (!this.cache) await this.load();
      await this.refocus();
    }).catch(() => {});
  }

  /** The channels `focus`'s selection names now, in focus (each filled in); until the first is,
   *  every change concerns this process. */
  private async refocus() {
    const select = this.select!;
    for (;;) {
      const state = this.cache!.state;
      const missing = select(state).filter((k) => !this.focused.has(k) && state.channels[k]);
      if (!missing.length) return;
      for (const k of missing) await this.scoped((s) => (s.channels[k] ? k : null));
    }
  }

  async revision(): Promise<string> {
    return this.serial(async () => {
      await this.current();
      return String(this.cache!.seq);
    });
  }

  /** Queries only when there may be news: a notification beyond what is applied, a listening
   *  connection that is not up (notifications may be lost), or the backstop's interval passed. A
   *  process with a focus looks for its channels' only. */
  catchUp(): Promise<boolean> {
    void this.listener.start();
    const c = this.cache;
    const l = this.listener;
    const need: Need = this.focused.size ? 'focus' : 'all';
    // Quiet when listening since before the last question, with nothing newer notified or read
    // by a lease renewal (which reads the head: the backstop then needs no query of its own).
    const quiet =
      c &&
      l.up &&
      this.lastAsked >= l.upSince &&
      (need === 'all' ? l.newest : l.newestConcerning) <= c.seq &&
      Date.now() - Math.max(this.lastAsked, l.heardAt) < PG_BACKSTOP_MS;
    if (quiet) return Promise.resolve(false);
    return this.serial(async () => {
      if (!this.cache) {
        await this.load();
        return true;
      }
      return this.news(false, need);
    });
  }

  /** The cache with every change applied. */
  private async current(): Promise<State> {
    await this.news();
    return this.cache!.state;
  }

  /** The key `scope` names on the cache, with that channel in focus and filled in (its changes
   *  this process left out applied); null: the call is taken whole (no such channel here). */
  private async scoped(scope: Scope): Promise<string | null> {
    const c = this.cache!;
    const key = scope(c.state);
    if (key === null) return null;
    if (this.focused.has(key)) return key;
    if (c.full < c.seq) {
      const s = ident(this.schema);
      const r = await this.query<ChangeRow & { first: string | null }>({
        name: `${this.schema}.fill`,
        text: `select seq, ops, archives, channel, null as first from ${s}.changes where seq > $1 and seq <= $2 and channel = $3
          union all select null, null, null, null, min(seq) from ${s}.changes order by seq nulls first`,
        values: [c.full, c.seq, key],
      });
      if (this.compactedPast(c, r.rows[0]?.first)) {
        await this.load();
        return this.scoped(scope);
      }
      for (const row of r.rows.slice(1)) this.applyOne(c, row);
    }
    this.focused.add(key);
    // A channel the cache now shows otherwise (saved, or no more) is looked up whole.
    return scope(c.state) === key ? key : null;
  }

  /** Whether changes after `c.full` were compacted away, `first` being the oldest change kept
   *  (the snapshot is loaded then). */
  private compactedPast(c: Cache, first: string | null | undefined): boolean {
    return first !== undefined && first !== null && Number(first) > c.full + 1;
  }

  /** Brings the cache up to date (`need`); true when anything changed (or it was loaded afresh).
   *  A head a lease renewal read within PG_HEARD_FRESH_MS stands in for the query, unless a
   *  notification told of a newer change (that renewal read the head before it, and a subscriber
   *  woken by the notification would find nothing, with no notification to come again), or
   *  `exact`: a refusal must be judged on a head read after the call began (another process's
   *  commit may have been acknowledged since that renewal). */
  private async news(exact = false, need: Need = 'all'): Promise<boolean> {
    const c = this.cache;
    if (!c) {
      await this.load();
      return true;
    }
    const whole = need === 'all' && c.full < c.seq;
    const h = this.heard;
    const fresh =
      !whole && h && h.seq === c.seq && this.listener.newest <= c.seq && Date.now() - h.at < PG_HEARD_FRESH_MS;
    if (!exact && fresh) return false;
    this.lastAsked = Date.now();
    // A retired project answers one row with no sequence number first (`store migrate`).
    const r = await this.query<ChangeRow & { retired: string | null; first: string | null }>(this.since(c, need));
    const head = r.rows[0]?.seq === null ? r.rows[0] : null;
    if (head?.retired) throw this.retiredError(head.retired);
    const rows = head ? r.rows.slice(1) : r.rows;
    if (whole && this.compactedPast(c, head?.first)) {
      await this.load();
      return true;
    }
    const applied = this.applyRows(c, rows, whole);
    if (applied === 'whole') {
      await this.news(true, 'all');
      return true;
    }
    if (!applied) await this.load();
    return rows.some((x) => x.ops !== null);
  }

  /** The query of what `c` lacks: every change after its head (those of channels out of its
   *  focus without ops when only the focus is needed), and, to make it whole, the ones it
   *  left out before. */
  private since(c: Cache, need: Need): pg.QueryConfig {
    const s = ident(this.schema);
    const retired = `union all select null, null, null, null, null, retired from ${s}.head where retired is not null order by seq nulls first`;
    if (need === 'focus')
      return {
        name: `${this.schema}.since-focus`,
        text: `select seq, case when ${concernsFocus('$2')} then ops end as ops, archives, channel, null as first, null as retired
          from ${s}.changes where seq > $1 ${retired}`,
        values: [c.seq, [...this.focused]],
      };
    if (c.full < c.seq)
      return {
        name: `${this.schema}.since-whole`,
        text: `select seq, ops, archives, channel, null as first, null as retired
          from ${s}.changes where seq > $1 and (seq > $2 or not ${concernsFocus('$3')})
          union all select null, null, null, null, (select min(seq) from ${s}.changes), retired from ${s}.head order by seq nulls first`,
        values: [c.full, c.seq, [...this.focused]],
      };
    return {
      name: `${this.schema}.since`,
      text: `select seq, ops, archives, channel, null as first, null as retired from ${s}.changes where seq > $1 ${retired}`,
      values: [c.seq],
    };
  }

  private retiredError(to: string): RefusalError {
    this.cache = null;
    return new RefusalError(retired(this.location, to));
  }

  private async load(): Promise<State> {
    this.lastAsked = Date.now();
    const results = (await this.query(loadSql(this.schema))) as unknown as pg.QueryResult[];
    const [, head, changes] = results;
    const snap = head!.rows[0] as { retired: string | null; seq: string | null; state: State | null };
    if (snap.retired) throw this.retiredError(snap.retired);
    const seq = snap.state ? Number(snap.seq) : 0;
    const c: Cache = { state: snap.state ?? emptyState(), seq, full: seq, box: null };
    if (this.applyRows(c, changes!.rows as ChangeRow[]) !== true)
      throw new Error(`the changes of ${this.location} do not follow its snapshot`);
    c.box = Mailbox.of(c.state);
    this.cache = c;
    return c.state;
  }

  /** Applies changes in order, each checked as it is replayed: a change after the head (one
   *  without ops is of a channel out of focus: only its number is learnt), or (`whole`: the query
   *  of every change left out, then the rest) one left out before. false when they do not continue the cache (compacted away since: the
   *  caller loads); 'whole' when a change of no one channel comes while others are left out (the
   *  caller makes the cache whole first). */
  private applyRows(c: Cache, rows: ChangeRow[], whole = false): boolean | 'whole' {
    for (const row of rows) {
      const seq = Number(row.seq);
      if (seq <= c.seq) {
        if (whole && seq > c.full && row.ops !== null) this.applyOne(c, row);
        continue;
      }
      // `whole`: the rows before this one filled in every change left out.
      if (whole) c.full = c.seq;
      if (seq !== c.seq + 1) return false;
      if (row.ops !== null && row.channel === null && c.full < c.seq) return 'whole';
      if (row.ops !== null) this.applyOne(c, row);
      if (c.full === c.seq && row.ops !== null) c.full = seq;
      c.seq = seq;
    }
    if (whole) c.full = c.seq;
    return true;
  }

  private applyOne(c: Cache, row: ChangeRow) {
    const ops = row.ops!;
    const undo = applyOps(c.state, ops);
    const problem = checkOps(c.state, ops, false).problem;
    if (problem) {
      undo();
      this.cache = null;
      throw new RefusalError(
        refuse(
          'state_unreadable',
          `Change ${row.seq} of ${this.location} is invalid (${problem}); the state was not changed. Report it; \`opencomms doctor\` shows the store.`,
        ),
      );
    }
    c.box?.apply(c.state, ops);
  }

  // ---- writing ---------------------------------------------------------------------------------

  /** Optimistic first: one round trip when this process is up to date (an answer that writes
   *  nothing costs one too: the check that nothing is newer). When another process committed
   *  first, the statement answered its changes; they are applied, and the mutation runs again
   *  with the project's lock held (two more round trips, and it cannot lose): retried
   *  optimistically instead, under many writers each try loses to another writer's, and every
   *  lost try costs a whole run of the mutation. While other processes keep writing (`contended`:
   *  a try lost, and every locked run since found their changes), mutations take the lock at once:
   *  a try would lose again, and the lock's own read is the catch-up. A scoped mutation loses only
   *  to a change of a channel in this process's focus or of none ("Focus"). */
  mutate<T>(fn: (draft: State) => MutateOutcome<T>, scope?: Scope): Promise<T> {
    return this.serial(async () => {
      if (!this.cache) await this.load();
      let key = scope ? await this.scoped(scope) : null;
      if (key === null && this.cache!.full < this.cache!.seq) await this.news(true, 'all');
      if (this.contended) return this.attemptLocked(fn, key);
      // A cache a notification already says is behind would lose its optimistic try, having
      // sent the whole change for nothing (a pull's history is 100 envelopes): it catches up first.
      const l = this.listener;
      if ((key === null ? l.newest : l.newestConcerning) > this.cache!.seq)
        await this.news(true, key === null ? 'all' : 'focus');
      for (let i = 0; i < PG_OPTIMISTIC_TRIES; i++) {
        const step = await this.attempt(fn, key);
        if (step.done) return step.answer;
        if (step.widen) key = null;
      }
      this.contended = true;
      return this.attemptLocked(fn, key);
    });
  }

  private async attempt<T>(
    fn: (draft: State) => MutateOutcome<T>,
    key: string | null,
  ): Promise<{ done: true; answer: T } | { done: false; widen?: true }> {
    const c = this.cache!;
    const step = this.prepare(c, fn, key);
    if ('widen' in step) {
      await this.news(true, 'all');
      return { done: false, widen: true };
    }
    // An answer that writes nothing (a refusal, mostly) must hold on the newest state too: one
    // computed on a cache another process has moved past would never meet the server.
    if ('result' in step)
      return (await this.news(true, key === null ? 'all' : 'focus'))
        ? { done: false }
        : { done: true, answer: step.result };
    const rows = await this.commitStatement<CommitRow>(step.query, c.seq, step);
    const mine = rows.length === 1 && rows[0]!.o_mine ? Number(rows[0]!.o_seq) : null;
    if (mine !== null) {
      this.committed(c, mine);
      return { done: true, answer: step.answer };
    }
    // Someone committed first: their changes, then this mutation again on what they made.
    step.undo();
    const news = rows.map((r) => ({ seq: r.o_seq, ops: r.o_ops, archives: r.o_archives, channel: r.o_channel }));
    const applied = news.length ? this.applyRows(c, news) : false;
    if (applied === 'whole') await this.news(true, 'all');
    else if (!applied) await this.load();
    return { done: false };
  }

  /** The mutation under the project's lock. A cache so far behind that the changes it lacks were
   *  compacted away reloads the snapshot (outside the lock, which a load's own read-only
   *  transaction cannot share) and takes the lock again. */
  private async attemptLocked<T>(fn: (draft: State) => MutateOutcome<T>, key: string | null): Promise<T> {
    for (let reloads = 0; ; ) {
      const step = await this.lockedOnce(fn, key);
      if (step.done) return step.answer;
      if (step.widen) {
        key = null;
        continue;
      }
      if (++reloads >= PG_COMPACTED_RELOADS)
        throw new Error(`the changes of ${this.location} were compacted during every retry of a mutation; retry`);
      await this.load();
    }
  }

  private async lockedOnce<T>(
    fn: (draft: State) => MutateOutcome<T>,
    key: string | null,
  ): Promise<{ done: true; answer: T } | { done: false; widen?: true }> {
    const s = ident(this.schema);
    const c = this.cache!;
    if (key === null && c.full < c.seq) await this.news(true, 'all');
    const ops = key === null ? 'ops' : `case when ${concernsFocus(literal([...this.focused]))} then ops end`;
    try {
      const [, , since] = (await this.query(
        `begin; select seq from ${s}.head for update; select seq, ${ops} as ops, archives, channel from ${s}.changes where seq > ${Number(c.seq)} order by seq;`,
      )) as unknown as pg.QueryResult<ChangeRow>[];
      const applied = this.applyRows(c, since!.rows);
      if (applied !== true) {
        await this.query('rollback');
        if (applied === 'whole') {
          await this.news(true, 'all');
          return { done: false, widen: true };
        }
        return { done: false };
      }
      if (!since!.rows.some((r) => r.ops !== null)) this.contended = false;
      const step = this.prepare(c, fn, key);
      if ('widen' in step) {
        await this.query('rollback');
        return { done: false, widen: true };
      }
      if ('result' in step) {
        await this.query('rollback');
        return { done: true, answer: step.result };
      }
      // The change and the transaction's end in one round trip: the lock is held across one
      // turn of this process only (on a busy machine each turn waits to be scheduled).
      const rows = await this.commitStatement<CommitRow>(withCommit(step.query), c.seq, step);
      if (rows.length !== 1 || !rows[0]!.o_mine)
        this.undoing(step)(new Error(`${this.location} moved on while this process held its lock`));
      this.committed(c, Number(rows[0]!.o_seq));
      return { done: true, answer: step.answer };
    } catch (e) {
      await this.client?.query('rollback').catch(() => {});
      throw e;
    }
  }

  /** The statement that commits `step`, prepared on the change `base`: its rows (when its answer
   *  was lost with the connection and asking the server (settle) showed it committed, the row of
   *  that change). A change the server may hold is never answered as not written. Any other
   *  failure takes the change back out of the cache and drops the cache (the next access reloads). */
  private async commitStatement<R extends pg.QueryResultRow>(
    q: pg.QueryConfig | string,
    base: number,
    step: Prepared,
  ): Promise<R[]> {
    const conn = await this.connection().catch(this.undoing(step)); // a failure here sent nothing
    try {
      const r = (await conn.query<R>(q as pg.QueryConfig)) as pg.QueryResult<R> | pg.QueryResult<R>[];
      return (Array.isArray(r) ? r[0]! : r).rows; // a statement and COMMIT answer two results
    } catch (e) {
      this.dropBroken(conn, e);
      const seq = isConnectionError(e) ? await this.settle(base, step).catch(this.undoing(step)) : null;
      if (seq !== null)
        return [
          { o_seq: String(seq), o_ops: null, o_archives: false, o_channel: step.channel, o_mine: true } as unknown as R,
        ];
      return this.undoing(step)(asRefusal(e, this.location));
    }
  }

  /** Takes `step` back out of the cache, drops the cache, and throws `e`. */
  private undoing(step: Prepared) {
    return (e: unknown): never => {
      step.undo();
      this.cache = null;
      throw e;
    };
  }

  /** The sequence number of the change `step` made on `base` when it was committed (null: it was
   *  not), when its commit's answer was lost. Asked once the head row's lock was had, so that a
   *  commit the server is still running for a client that is gone has ended, and asked again while
   *  the server cannot answer, for up to PG_IN_DOUBT_MS (a restart with crash recovery takes a few
   *  seconds). The first change after `base` that holds the same ops is this one: on the same
   *  state they make the same state, so the mutation's answer holds. Past that bound, or when
   *  changes after `base` were compacted away, the outcome is unknown, and the refusal says so. */
  private async settle(base: number, step: Prepared): Promise<number | null> {
    const s = ident(this.schema);
    const bound = this.options.inDoubtMs ?? PG_IN_DOUBT_MS;
    const until = Date.now() + bound;
    for (let i = 0; Date.now() < until; i++) {
      try {
        // Two statements: one read in the statement that waited for the lock would use a
        // snapshot from before the wait, blind to the commit it waited for.
        await this.query(`select seq from ${s}.head for update`);
        const r = await this.query<{ head: string; ours: string | null; first: string | null }>({
          text: `select h.seq as head, (select min(c.seq) from ${s}.changes c where c.seq > $1 and c.ops = $2::jsonb) as ours,
            (select min(seq) from ${s}.changes) as first from ${s}.head h`,
          values: [base, step.ops],
        });
        const { head, ours, first } = r.rows[0]!;
        if (ours !== null) return Number(ours);
        if (Number(head) <= base || (first !== null && Number(first) <= base + 1)) return null;
        break;
      } catch (e) {
        const reason = e instanceof RefusalError ? e.refusal.data?.reason : null;
        if (reason !== 'state_unreadable' && reason !== 'state_busy') throw e;
        await new Promise((r) => setTimeout(r, Math.max(0, Math.min(reconnectDelayMs(i), until - Date.now()))));
      }
    }
    throw new RefusalError(
      refuse(
        'state_unreadable',
        `The connection to PostgreSQL at ${this.location} was lost while this change was being committed, and the server did not say within ${bound / 1000} s whether it was: it may have been recorded. Once \`opencomms store status\` shows the server up, look before repeating it (a send: read the channel's history).`,
        { in_doubt: true },
      ),
    );
  }

  /** This process's change committed as `seq` (past changes of channels out of its focus, when
   *  more than one after its head). A snapshot is of the whole state: one due while channels are
   *  left out is written once they are filled in. */
  private committed(c: Cache, seq: number) {
    if (c.full === c.seq && seq === c.seq + 1) c.full = seq;
    c.seq = seq;
    this.lastAsked = Date.now();
    if (seq % (this.options.snapshotEvery ?? PG_SNAPSHOT_EVERY) !== 0) return;
    if (c.full === c.seq) this.snapshot(c);
    else
      void this.serial(async () => {
        await this.news(true, 'all');
        if (this.cache) this.snapshot(this.cache);
      }).catch(() => {});
  }

  /** Runs `fn` on the cache: its answer when nothing is to be written, else the commit statement
   *  and how to take the change back out of the cache. A change scoped to `key` that writes beyond
   *  that channel is taken whole (its channel null); `widen` when the cache is not whole for it. */
  private prepare<T>(
    c: Cache,
    fn: (draft: State) => MutateOutcome<T>,
    key: string | null,
  ): { result: T } | { widen: true } | (Prepared & { answer: T }) {
    const run = runOnDraft(c.state, fn);
    if (!run.out) return { result: run.result };
    const { result: answer, out, draft } = run;
    const checked = checkedChanges(c.state, draft, out.ops);
    const channel = key !== null && opsWithin(c.state, checked.ops, key, out.history?.map(raw)) ? key : null;
    if (key !== null && channel === null && c.full < c.seq) {
      checked.undo();
      return { widen: true };
    }
    const mail = c.box!.apply(c.state, checked.ops);
    const undo = () => {
      checked.undo();
      mail.undo();
    };
    let archive: Archive | null = null;
    try {
      archive = out.archive ? ArchiveSchema.parse(detach(out.archive)) : null;
    } catch (e) {
      undo();
      throw e;
    }
    const history = out.history?.length ? historyBatches(out.history.map(raw)) : null;
    const query = this.commitQuery([
      c.seq,
      channel,
      [...this.focused],
      JSON.stringify(checked.ops),
      history?.channels ?? null,
      history?.counts ?? null,
      history?.ids ?? null,
      history?.envelopes ?? null,
      archive && JSON.stringify(archive),
      out.deleteArchive ?? null,
      out.deleteHistory?.length ? out.deleteHistory : null,
      mail.upsert.length || mail.remove.length ? JSON.stringify({ upsert: mail.upsert, remove: mail.remove }) : null,
    ]);
    return { query, undo, answer, ops: query.values![3] as string, channel };
  }

  /** The commit statement (a statement prepared once per connection, by name). */
  private commitQuery(values: unknown[]): pg.QueryConfig {
    return {
      name: `${this.schema}.commit`,
      text: `select * from ${ident(this.schema)}.commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      values,
    };
  }

  /** Readies this connection's server process for a first commit that must be quick (a host's
   *  wake waiter: one commit, then it exits). A server process runs the `commit` function's first
   *  call slowly (it compiles the function and plans each statement as it first meets it: a fresh
   *  connection's first drain took several ms more), so this one runs a commit of no change on the
   *  cache's head, rolled back: every statement a drain's commit runs, nothing kept, no
   *  notification sent. One simple query (no round trip inside the transaction): the head's row
   *  lock is held only while the server runs it. A failure (a head moved on, a retired project)
   *  leaves the commit itself to find out. */
  async warm(): Promise<void> {
    const base = this.cache?.seq;
    if (base === undefined) return;
    const none = this.commitQuery([
      base,
      null,
      [],
      '[]',
      null,
      null,
      null,
      null,
      null,
      null,
      null,
      '{"upsert":[],"remove":[]}',
    ]);
    await this.query(`begin; ${literally(none)}; rollback;`).catch(() =>
      this.client?.query('rollback').catch(() => {}),
    );
  }

  /** The state whole at `c.seq`, so that a cold start reads it and a bounded tail. Written in the
   *  background, on the listening connection when it is up (the mutations after it need not wait
   *  for the server to store it), in pieces of PG_SNAPSHOT_PIECE_CHARS that the server joins. One
   *  at a time (the next is PG_SNAPSHOT_EVERY changes on); `close` waits for it. A failure loses
   *  nothing (the changes stay until a later snapshot). */
  private snapshot(c: Cache) {
    if (this.snapshotting) return;
    const s = ident(this.schema);
    const seq = c.seq;
    const pieces = jsonPieces(raw(c.state), PG_SNAPSHOT_PIECE_CHARS);
    const run = (q: pg.QueryConfig) => this.listener.run(q) ?? this.query(q);
    this.snapshotting = (async () => {
      for (let n = 0; n < pieces.length; n++)
        await run({
          text: `insert into ${s}.snapshot_parts values ($1, $2, $3) on conflict (seq, n) do update set part = excluded.part`,
          values: [seq, n, pieces[n]],
        });
      await run({ text: `select ${s}.compact($1, $2)`, values: [seq, pieces.length] });
    })()
      .catch(() => {})
      .then(() => (this.snapshotting = null));
  }

  // ---- subscribing -----------------------------------------------------------------------------

  /** Never refuses: a server down now is listened to once it is up (calls meanwhile refuse). */
  subscribe(onChange: (change: StoreChange) => Promise<void>, log: (line: string) => void): Promise<Subscription> {
    return this.listener.subscribe(onChange, log);
  }

  // ---- history and archives ----------------------------------------------------------------------

  async history(channelId: string, limit: number): Promise<Envelope[]> {
    const r = await this.query<{ envelope: Envelope }>({
      text: `select x.envelope from ${historyEnvelopes(this.schema)} where h.channel_id = $1 order by h.n desc, x.i desc limit $2`,
      values: [channelId, limit],
    });
    return r.rows.map((x) => x.envelope);
  }

  async historyIds(channelId: string): Promise<Set<string>> {
    const r = await this.query<{ message_id: string }>({
      text: `select unnest(message_ids) as message_id from ${ident(this.schema)}.history where channel_id = $1`,
      values: [channelId],
    });
    return new Set(r.rows.map((x) => x.message_id));
  }

  /** Among the newest `maxScan` ids, the newest that is `messageId`; only its envelope is read. */
  async findInHistory(channelId: string, messageId: string, maxScan: number): Promise<Envelope | null> {
    const r = await this.query<{ envelope: Envelope }>({
      text: `select t.envelopes -> (t.i - 1)::int as envelope from (
          select h.n, h.envelopes, x.id, x.i from ${ident(this.schema)}.history h cross join lateral unnest(h.message_ids) with ordinality x(id, i)
          where h.channel_id = $1 order by h.n desc, x.i desc limit $3) t
        where t.id = $2 order by t.n desc, t.i desc limit 1`,
      values: [channelId, messageId, maxScan],
    });
    return r.rows[0]?.envelope ?? null;
  }

  async archive(id: string): Promise<Archive | null> {
    if (!isArchiveId(id)) return null;
    const r = await this.query<{ archive: Archive }>({
      text: `select archive from ${ident(this.schema)}.archives where channel_id = $1`,
      values: [id],
    });
    return r.rows[0]?.archive ?? null;
  }

  async archiveByName(name: string): Promise<Archive | null> {
    const r = await this.query<{ archive: Archive }>({
      text: `select archive from ${ident(this.schema)}.archives where lower(name) = lower($1) order by saved_at desc limit 1`,
      values: [name.trim()],
    });
    return r.rows[0]?.archive ?? null;
  }

  /** Heads only: the messages stay in the database (a listing, or a saved channel's detail,
   *  shows none of them). */
  async archives(): Promise<{ archives: ArchiveHead[]; invalid: InvalidFile[] }> {
    const r = await this.query<{ archive: ArchiveHead }>(
      `select archive - 'messages' as archive from ${ident(this.schema)}.archives order by saved_at desc`,
    );
    return { archives: r.rows.map((x) => x.archive), invalid: [] };
  }

  /** What `opencomms store status` shows: the server, how far this process is behind the head
   *  (lag, in changes), what a cold start replays, and the OpenComms connections to the database. */
  async status(): Promise<PgStatus> {
    await this.peek();
    const s = ident(this.schema);
    const r = await this.query<{ server_version: string; head: string; snapshot: string | null; connections: string }>(
      `select current_setting('server_version') as server_version, (select seq from ${s}.head) as head, (select max(seq) from ${s}.snapshots) as snapshot,
        (select count(*) from pg_stat_activity where datname = current_database() and application_name = 'opencomms') as connections`,
    );
    const row = r.rows[0]!;
    const head = Number(row.head);
    return {
      server_version: row.server_version,
      head,
      lag: head - this.cache!.seq,
      cold_start_changes: head - Number(row.snapshot ?? 0),
      connections: Number(row.connections),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.tail;
    await this.snapshotting;
    this.closed = true;
    await this.listener.close();
    const c = this.client;
    this.client = null;
    await c?.end().catch(() => {});
  }
}
