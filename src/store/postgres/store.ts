// The store on PostgreSQL: one project = one schema = one total order of changes. A process keeps
// the state as one live object (as the file store does) and the sequence number of the last
// change it applied. A mutation runs on that object through the change tracker, checks what it
// wrote, and commits it in one statement against the head it holds (schema.ts `commit`): when
// another process committed first, the statement returns those changes instead; they are applied
// and the mutation runs again on the state they make (the engine is pure, so running it again is
// what it would have done had it come later). Reads catch up first (one query); the background
// catch-up queries only when a notification, a reconnect or the backstop says there is news.
import pg from './pg.ts';
import type { Archive, ArchiveHead } from '../../protocol/archive.ts';
import { ArchiveSchema } from '../../protocol/archive.ts';
import { applyOps, detach, raw, type Op } from '../../protocol/draft.ts';
import { isArchiveId } from '../../protocol/ids.ts';
import { RefusalError, refuse } from '../../protocol/result.ts';
import { emptyState, type Envelope, type State } from '../../protocol/schema.ts';
import type { InvalidFile, MutateOutcome, Store, Subscription, StoreChange } from '../types.ts';
import { checkedChanges, runOnDraft } from '../mutation.ts';
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
  /** The mailbox rows at `seq` (mailbox.ts); null while a cold load replays its tail. */
  box: Mailbox | null;
}

/** A change ready to commit: its statement, its ops as sent, and how to take it back out of the cache. */
interface Prepared {
  query: pg.QueryConfig;
  ops: string;
  undo: () => void;
}

interface CommitRow {
  o_seq: string;
  o_ops: Op[] | null;
  o_archives: boolean;
}

interface ChangeRow {
  seq: string;
  ops: Op[];
  archives: boolean;
}

/** `q` with its values written in as literals: one simple query may then hold more statements (a
 *  query with parameters is one statement). */
function literally(q: pg.QueryConfig): string {
  const literal = (v: unknown): string =>
    v === null || v === undefined
      ? 'null'
      : typeof v === 'number'
        ? String(v)
        : Array.isArray(v)
          ? `array[${v.map(literal).join(',')}]::${typeof v[0] === 'number' ? 'int' : 'text'}[]`
          : pg.escapeLiteral(String(v));
  return q.text.replace(/\$(\d+)/g, (_, n: string) => literal(q.values![Number(n) - 1]));
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

  constructor(private readonly options: PgStoreOptions) {
    this.schema = schemaOf(options.key);
    this.key = options.key;
    this.config = clientConfig(options.url, options.env);
    this.location = `${describeUrl(options.url)}#${options.key}`;
    this.listener = new Listener(this.config, this.schema);
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
      if (from < PG_LAYOUT) {
        // Layout 1 had no mailbox, layout 2 one with each row whole: laid out again, filled below.
        // Both had a history row per envelope: each becomes a batch of one, in order.
        await c.query(`drop table if exists ${s}.mailbox;
          alter table ${s}.history rename to history_2; alter index ${s}.history_channel rename to history_2_channel;`);
        await c.query(layoutSql(this.schema));
        await c.query(`insert into ${s}.history (channel_id, message_ids, envelopes)
          select channel_id, array[message_id], json_build_array(envelope) from ${s}.history_2 order by n;
          drop table ${s}.history_2;`);
        await this.fillMailbox(c);
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
    const cache: Cache = { state: snap?.state ?? emptyState(), seq: Number(snap?.seq ?? 0), box: null };
    if (!this.applyRows(cache, changes!.rows as ChangeRow[]))
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

  peek(): Promise<Readonly<State>> {
    return this.serial(() => this.current());
  }

  async revision(): Promise<string> {
    return this.serial(async () => {
      await this.current();
      return String(this.cache!.seq);
    });
  }

  /** Queries only when there may be news: a notification beyond what is applied, a listening
   *  connection that is not up (notifications may be lost), or the backstop's interval passed. */
  catchUp(): Promise<void> {
    void this.listener.start();
    const c = this.cache;
    const l = this.listener;
    // Quiet when listening since before the last question, with nothing newer notified or read
    // by a lease renewal (which reads the head: the backstop then needs no query of its own).
    const quiet =
      c &&
      l.up &&
      this.lastAsked >= l.upSince &&
      l.newest <= c.seq &&
      Date.now() - Math.max(this.lastAsked, l.heardAt) < PG_BACKSTOP_MS;
    if (quiet) return Promise.resolve();
    return this.serial(async () => void (await this.current()));
  }

  /** The cache brought up to date: the changes after it applied, or a cold load. */
  private async current(): Promise<State> {
    await this.news();
    return this.cache!.state;
  }

  /** Brings the cache up to date; true when anything changed (or it was loaded afresh). A head
   *  a lease renewal read within PG_HEARD_FRESH_MS stands in for the query, unless a notification
   *  told of a newer change (that renewal read the head before it, and a subscriber woken by the
   *  notification would find nothing, with no notification to come again), or `exact`: a refusal
   *  must be judged on a head read after the call began (another process's commit may have been
   *  acknowledged since that renewal). */
  private async news(exact = false): Promise<boolean> {
    const c = this.cache;
    if (!c) {
      await this.load();
      return true;
    }
    const h = this.heard;
    const fresh = h && h.seq === c.seq && this.listener.newest <= c.seq && Date.now() - h.at < PG_HEARD_FRESH_MS;
    if (!exact && fresh) return false;
    this.lastAsked = Date.now();
    // A retired project answers one row with no sequence number first (`store migrate`).
    const s = ident(this.schema);
    const r = await this.query<ChangeRow & { retired?: string }>({
      name: `${this.schema}.since`,
      text: `select seq, ops, archives, null as retired from ${s}.changes where seq > $1 union all select null, null, null, retired from ${s}.head where retired is not null order by seq nulls first`,
      values: [c.seq],
    });
    if (r.rows[0]?.retired) throw this.retiredError(r.rows[0].retired);
    if (!this.applyRows(c, r.rows)) await this.load();
    return r.rows.length > 0;
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
    const c: Cache = snap.state
      ? { state: snap.state, seq: Number(snap.seq), box: null }
      : { state: emptyState(), seq: 0, box: null };
    if (!this.applyRows(c, changes!.rows as ChangeRow[]))
      throw new Error(`the changes of ${this.location} do not follow its snapshot`);
    c.box = Mailbox.of(c.state);
    this.cache = c;
    return c.state;
  }

  /** Applies changes in order, each checked as it is replayed; false when they do not continue
   *  the cache (compacted away since: the caller loads). */
  private applyRows(c: Cache, rows: ChangeRow[]): boolean {
    for (const row of rows) {
      const seq = Number(row.seq);
      if (seq <= c.seq) continue;
      if (seq !== c.seq + 1) return false;
      const undo = applyOps(c.state, row.ops);
      const problem = checkOps(c.state, row.ops, false).problem;
      if (problem) {
        undo();
        this.cache = null;
        throw new RefusalError(
          refuse(
            'state_unreadable',
            `Change ${seq} of ${this.location} is invalid (${problem}); the state was not changed. Report it; \`opencomms doctor\` shows the store.`,
          ),
        );
      }
      c.box?.apply(c.state, row.ops);
      c.seq = seq;
    }
    return true;
  }

  // ---- writing ---------------------------------------------------------------------------------

  /** Optimistic first: one round trip when this process is up to date (an answer that writes
   *  nothing costs one too: the check that nothing is newer). When another process committed
   *  first, the statement answered its changes; they are applied, and the mutation runs again
   *  with the project's lock held (two more round trips, and it cannot lose): retried
   *  optimistically instead, under many writers each try loses to another writer's, and every
   *  lost try costs a whole run of the mutation. While other processes keep writing (`contended`:
   *  a try lost, and every locked run since found their changes), mutations take the lock at once:
   *  a try would lose again, and the lock's own read is the catch-up. */
  mutate<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    return this.serial(async () => {
      if (!this.cache) await this.load();
      else if (this.contended) return this.attemptLocked(fn);
      // A cache a notification already says is behind would lose its optimistic try, having
      // sent the whole change for nothing (a pull's history is 100 envelopes): it catches up first.
      else if (this.listener.newest > this.cache.seq) await this.news(true);
      for (let i = 0; i < PG_OPTIMISTIC_TRIES; i++) {
        const step = await this.attempt(fn);
        if (step.done) return step.answer;
      }
      this.contended = true;
      return this.attemptLocked(fn);
    });
  }

  private async attempt<T>(
    fn: (draft: State) => MutateOutcome<T>,
  ): Promise<{ done: true; answer: T } | { done: false }> {
    const c = this.cache!;
    const step = this.prepare(c, fn);
    // An answer that writes nothing (a refusal, mostly) must hold on the newest state too: one
    // computed on a cache another process has moved past would never meet the server.
    if ('result' in step) return (await this.news(true)) ? { done: false } : { done: true, answer: step.result };
    // null: the answer was lost, and asking the server showed this change committed.
    const rows = (await this.commitStatement<CommitRow>(step.query, c.seq, step)) ?? [
      { o_seq: String(c.seq + 1), o_ops: null, o_archives: false },
    ];
    const committed = rows.length === 1 && rows[0]!.o_ops === null ? Number(rows[0]!.o_seq) : null;
    if (committed !== null) {
      this.committed(c, committed);
      return { done: true, answer: step.answer };
    }
    // Someone committed first: their changes, then this mutation again on what they made.
    step.undo();
    const news = rows.map((r) => ({ seq: r.o_seq, ops: r.o_ops ?? [], archives: r.o_archives }));
    if (!news.length || !this.applyRows(c, news)) await this.load();
    return { done: false };
  }

  /** The mutation under the project's lock. A cache so far behind that the changes it lacks were
   *  compacted away reloads the snapshot (outside the lock, which a load's own read-only
   *  transaction cannot share) and takes the lock again. */
  private async attemptLocked<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    for (let reloads = 0; ; reloads++) {
      const step = await this.lockedOnce(fn);
      if (step.done) return step.answer;
      if (reloads >= PG_COMPACTED_RELOADS)
        throw new Error(`the changes of ${this.location} were compacted during every retry of a mutation; retry`);
      await this.load();
    }
  }

  private async lockedOnce<T>(
    fn: (draft: State) => MutateOutcome<T>,
  ): Promise<{ done: true; answer: T } | { done: false }> {
    const s = ident(this.schema);
    const c = this.cache!;
    try {
      const [, , since] = (await this.query(
        `begin; select seq from ${s}.head for update; select seq, ops, archives from ${s}.changes where seq > ${Number(c.seq)} order by seq;`,
      )) as unknown as pg.QueryResult<ChangeRow>[];
      if (!this.applyRows(c, since!.rows)) {
        await this.query('rollback');
        return { done: false };
      }
      if (!since!.rows.length) this.contended = false;
      const step = this.prepare(c, fn);
      if ('result' in step) {
        await this.query('rollback');
        return { done: true, answer: step.result };
      }
      // The change and the transaction's end in one round trip: the lock is held across one
      // turn of this process only (on a busy machine each turn waits to be scheduled).
      const rows = await this.commitStatement<CommitRow>(withCommit(step.query), c.seq, step);
      if (rows && (rows.length !== 1 || rows[0]!.o_ops !== null))
        this.undoing(step)(new Error(`${this.location} moved on while this process held its lock`));
      this.committed(c, c.seq + 1);
      return { done: true, answer: step.answer };
    } catch (e) {
      await this.client?.query('rollback').catch(() => {});
      throw e;
    }
  }

  /** The statement that commits `step`, prepared on the change `base`: its rows, or null when its
   *  answer was lost with the connection and asking the server (settle) showed it committed. A
   *  change the server may hold is never answered as not written. Any other failure takes the
   *  change back out of the cache and drops the cache (the next access reloads). */
  private async commitStatement<R extends pg.QueryResultRow>(
    q: pg.QueryConfig | string,
    base: number,
    step: Prepared,
  ): Promise<R[] | null> {
    const conn = await this.connection().catch(this.undoing(step)); // a failure here sent nothing
    try {
      const r = (await conn.query<R>(q as pg.QueryConfig)) as pg.QueryResult<R> | pg.QueryResult<R>[];
      return (Array.isArray(r) ? r[0]! : r).rows; // a statement and COMMIT answer two results
    } catch (e) {
      this.dropBroken(conn, e);
      if (isConnectionError(e) && (await this.settle(base, step).catch(this.undoing(step)))) return null;
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

  /** Whether the change `step` made on `base` was committed, when its commit's answer was lost.
   *  Asked once the head row's lock was had, so that a commit the server is still running for a
   *  client that is gone has ended, and asked again while the server cannot answer, for up to
   *  PG_IN_DOUBT_MS (a restart with crash recovery takes a few seconds). The change after `base`
   *  is this one when it holds the same ops: on the same state they make the same state, so the
   *  mutation's answer holds. Past that bound, or when that change was compacted away, the outcome
   *  is unknown, and the refusal says so. */
  private async settle(base: number, step: Prepared): Promise<boolean> {
    const s = ident(this.schema);
    const bound = this.options.inDoubtMs ?? PG_IN_DOUBT_MS;
    const until = Date.now() + bound;
    for (let i = 0; Date.now() < until; i++) {
      try {
        // Two statements: one read in the statement that waited for the lock would use a
        // snapshot from before the wait, blind to the commit it waited for.
        await this.query(`select seq from ${s}.head for update`);
        const r = await this.query<{ head: string; ours: boolean | null }>({
          text: `select h.seq as head, (select c.ops = $2::jsonb from ${s}.changes c where c.seq = $1) as ours from ${s}.head h`,
          values: [base + 1, step.ops],
        });
        const { head, ours } = r.rows[0]!;
        if (ours !== null) return ours;
        if (Number(head) <= base) return false;
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

  private committed(c: Cache, seq: number) {
    c.seq = seq;
    this.lastAsked = Date.now();
    if (seq % (this.options.snapshotEvery ?? PG_SNAPSHOT_EVERY) === 0) this.snapshot(c);
  }

  /** Runs `fn` on the cache: its answer when nothing is to be written, else the commit statement
   *  and how to take the change back out of the cache. */
  private prepare<T>(c: Cache, fn: (draft: State) => MutateOutcome<T>): { result: T } | (Prepared & { answer: T }) {
    const run = runOnDraft(c.state, fn);
    if (!run.out) return { result: run.result };
    const { result: answer, out, draft } = run;
    const checked = checkedChanges(c.state, draft, out.ops);
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
    return { query, undo, answer, ops: query.values![1] as string };
  }

  /** The commit statement (a statement prepared once per connection, by name). */
  private commitQuery(values: unknown[]): pg.QueryConfig {
    return {
      name: `${this.schema}.commit`,
      text: `select * from ${ident(this.schema)}.commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
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
    const none = this.commitQuery([base, '[]', null, null, null, null, null, null, null, '{"upsert":[],"remove":[]}']);
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
