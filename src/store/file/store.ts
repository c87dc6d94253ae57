// The file store: state.json is a snapshot, and the journal it names holds every mutation since,
// one appended line each (journal.ts). A process keeps the state as one live object and brings it
// up to date by reading only what other processes appended; a mutation changes that object in
// place through a change tracker (protocol/draft.ts) and appends what it changed. Every so often
// the state is written whole again as a new snapshot with a new journal (compaction).
//
// The promises of the old whole-file rewrite hold: the lock serialises writers; a writer proves
// it still holds the lock right before it writes; what is written is validated first; a process
// killed at any point leaves whole lines and whole files (a journal line is one write() unless the
// disk takes less, a snapshot one rename); readers never apply a partial line. A write that fails
// is taken back and refused (fs.ts). At the `durable` level every write is also fsynced, so a
// power loss keeps it too (docs/reliability.md, "Damage").
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { applyOps, detach, raw, type Op } from '../../protocol/draft.ts';
import { JOURNAL_COMPACT_BYTES, RENAME_RETRY_DELAYS_MS } from '../../protocol/limits.ts';
import { emptyState, type SessionsState, type State } from '../../protocol/schema.ts';
import type { Envelope } from '../../protocol/schema.ts';
import { deleteArchive, findArchiveByName, listArchives, readArchive, writeArchive } from './archives.ts';
import { writeAtomic, writeAtomicSync } from './atomic.ts';
import {
  appendHistory,
  closeHistoryLogs,
  deleteHistory,
  findInHistory,
  historyIds,
  readHistory,
} from './history-log.ts';
import {
  JournalCut,
  JournalWriter,
  journalFile,
  readJournal,
  sealLine,
  sealOf,
  type Entry,
  type Seal,
} from './journal.ts';
import { closeQuietly, codeOf, makeDir, openAppend, StoreWriteError, storeFs } from './fs.ts';
import { loadLockFree, loadLocked, lostSnapshot, type Snapshot } from './load.ts';
import { lockHeld, withLock, type HeldLock } from './lock.ts';
import { migrationPending } from './migrate.ts';
import { ensureDir, resolvePaths, type StorePaths } from '../paths.ts';
import { sameKey, statKey, type FileKey } from './file-key.ts';
import { pinFile, readStateFile, serialize, serializeChunks, storeStats, unpin, type Pinned } from './state-file.ts';
import { RefusalError, refuse } from '../../protocol/result.ts';
import type { MutateOutcome, Store, Subscription, StoreChange } from '../types.ts';
import { readSessionsIndex, writeSessionsIndex } from './sessions-index.ts';
import { checkedChanges, runOnDraft } from '../mutation.ts';
import { checkOps } from '../validate.ts';
import { subscribeToFiles } from './subscribe.ts';

/** `default` survives a killed process (whole lines, atomic renames); `durable` also survives a
 *  power loss (every write fsynced), like SQLite's synchronous=NORMAL and FULL. */
export type Durability = 'default' | 'durable';

export interface FileStoreOptions {
  /** false = reload from disk for every call (benchmarks, debugging). */
  fastPath?: boolean;
  /** Default: OPENCOMMS_DURABILITY, else `default`. */
  durability?: Durability;
  /** Journal size that triggers a new snapshot; tests make it small. */
  compactBytes?: number;
}

/** Every mutation is checked against a fresh load from disk under test (OPENCOMMS_VERIFY_WRITES=1
 *  elsewhere): the proof that the journal records every change. */
const VERIFY_WRITES = process.env.VITEST !== undefined || process.env.OPENCOMMS_VERIFY_WRITES === '1';

export const durabilityFromEnv = (env: NodeJS.ProcessEnv = process.env): Durability =>
  env.OPENCOMMS_DURABILITY === 'durable' ? 'durable' : 'default';

/** The state as this process holds it, and how far into the files it has read. */
interface Cache {
  state: State;
  /** A pin on the snapshot's inode (null: there was no state.json). */
  pin: Pinned | null;
  journalId: string | null;
  /** The snapshot says its journal was created before it: an absent journal is lost. */
  created: boolean;
  /** Bytes of the journal applied, and entries; the last bytes before `offset` (journal.ts). */
  offset: number;
  count: number;
  tail: Buffer;
  /** The journal's size, checked under the lock this process holds now (null: not checked). */
  size: number | null;
}

const NO_TAIL = Buffer.alloc(0);

/** Journal bytes a fresh reader applied past the sessions index before it writes the index again:
 *  below it, rewriting the index costs more than the next reader's replay of those lines. */
const SESSIONS_INDEX_BEHIND_BYTES = 256 * 1024;

/** What a mutation writes, taken out of the draft before anything is written. */
interface Writes {
  history: Envelope[];
  archive: MutateOutcome<unknown>['archive'];
}

export class FileStore implements Store {
  readonly paths: StorePaths;
  readonly durability: Durability;
  private cache: Cache | null = null;
  private readonly journal = new JournalWriter();
  /** Set when the journal was found damaged: the next access recovers it under the lock. */
  private damage: string | null = null;
  /** Damage to record in `state.errors` (a journal cut under this process, or lost): the next
   *  access loads what is on disk and records it under the lock. */
  private note: { reason: string; message: string } | null = null;
  /** A writer that finds the lock held applies what the holders before it appended meanwhile,
   *  instead of after taking it: with four writers that was three lines of every turn. */
  private readonly lockOptions = { whileBusy: () => void this.advance() };

  constructor(
    projectDir: string,
    private readonly options: FileStoreOptions = {},
  ) {
    this.paths = resolvePaths(projectDir);
    this.durability = options.durability ?? durabilityFromEnv();
  }

  get location(): string {
    return this.paths.project;
  }

  private get durable() {
    return this.durability === 'durable';
  }

  async read(): Promise<State> {
    return structuredClone(await this.current());
  }

  /** The live state: read-only for the caller, and changed in place by later mutations. */
  peek(): Promise<Readonly<State>> {
    return this.current();
  }

  /** A fresh process (a CLI read) answers from the sessions index and the journal lines since,
   *  when the index still describes the files. null: read the state (a process holding it, or an
   *  index that does not describe the files; that load writes the index for the next one). */
  async sessions(): Promise<SessionsState | null> {
    if (this.cache || this.options.fastPath === false) return null;
    const indexed = readSessionsIndex(this.paths);
    if (indexed) {
      if (indexed.behind >= SESSIONS_INDEX_BEHIND_BYTES) indexed.write();
      return indexed.state;
    }
    const state = await this.current();
    const c = this.cache as Cache | null; // loaded by `current`
    if (c?.pin && this.damage === null && this.note === null) {
      const { journalId, created, offset, count, tail } = c;
      writeSessionsIndex(this.paths, state, { key: c.pin.key, journalId, created, offset, count, tail });
    }
    return null;
  }

  async revision(): Promise<string> {
    await this.current();
    const c = this.cache;
    return c ? `${c.pin?.key.ino ?? 0}:${c.pin?.key.ctimeNs ?? 0}:${c.journalId}:${c.offset}` : 'none';
  }

  /** Mutations of this instance run one at a time in call order: under the lock alone, a later
   *  call of this process could overtake an earlier one still waiting for it. */
  private queue: Promise<unknown> = Promise.resolve();

  mutate<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    const run = this.queue.then(() => this.mutateInOrder(fn));
    this.queue = run.catch(() => {});
    return run;
  }

  private async mutateInOrder<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    // Nothing on disk yet: a call that would change nothing (a refusal, a start-up sweep with
    // nothing to sweep) answers from an empty state and creates no file, not even `.opencomms/`.
    if (!existsSync(this.paths.dir)) {
      if (!(await migrationPending(this.paths, null))) {
        const dry = fn(emptyState());
        if (!dry.changed) return dry.result;
      }
      await ensureDir(this.paths);
    }
    return withLock(
      this.paths,
      async (lock) => {
        // Moved to another store (store/move.ts writes the binding under this lock): the
        // files are retired, and a write here would fork the project.
        if (existsSync(this.paths.binding))
          throw new RefusalError(
            refuse(
              'state_incompatible',
              'This project moved to another store (.opencomms/store.json): restart this process to use it; nothing was written.',
            ),
          );
        const state = await this.locked(lock);
        const run = runOnDraft(state, fn);
        if (!run.out) return run.result;
        const { result, out, draft } = run;
        // The envelopes leaving for the history logs are only stringified, before anything else
        // touches the state: their plain objects do. A copy (one per envelope of a pull) is
        // needed only where the draft is rolled back and applied again (an archive write) first.
        const history = out.history ?? [];
        const writes: Writes = {
          history: out.archive ? detach(history) : history.map(raw),
          archive: detach(out.archive),
        };
        const { ops, undo } = checkedChanges(state, draft, out.ops);
        // What the files written before the state take back should the state write fail: a
        // failed operation leaves no trace.
        const takeBack: Array<() => void> = [];
        try {
          if (writes.archive) {
            // The archive is written first (a crash never loses the saved messages), and while
            // that waits, this process must see the old state: put it back, then apply again.
            undo();
            lock.assertHeld();
            takeBack.push(await writeArchive(this.paths, writes.archive, this.durable));
            applyOps(state, ops);
          }
          // Log first: a crash before the state write duplicates a log line (readers keep one per
          // id) instead of losing the envelopes. The journal write checks the lock itself.
          if (writes.history.length) {
            lock.assertHeld();
            takeBack.push(appendHistory(this.paths, writes.history, this.durable));
          }
          await this.persist(state, ops, lock);
        } catch (e) {
          this.drop(); // memory may be ahead of disk now: the next access reloads
          for (const back of takeBack.reverse()) back();
          throw writeError(e, 'the state');
        }
        if (VERIFY_WRITES) await this.verify(state);
        // Deletions follow the write: a crash in between, or a file system that refuses them,
        // leaves an orphan file, never a live channel whose archive is gone. The operation is done.
        try {
          if (out.deleteArchive) await deleteArchive(this.paths, out.deleteArchive);
          for (const id of out.deleteHistory ?? []) await deleteHistory(this.paths, id);
        } catch {
          // see above: an orphan file
        }
        return result;
      },
      this.lockOptions,
    );
  }

  /** A mutation that planned its changes as operations (a send) changed nothing through its
   *  draft: they are applied to the state here, as a replay applies them, and put back by `undo`. */
  /** A subscription may start before anything exists (a console on a fresh project): it keeps trying to
   *  watch the directories on its rescan, and creates nothing (a bare start writes no file). */
  subscribe(onChange: (change: StoreChange) => Promise<void>, log: (line: string) => void): Promise<Subscription> {
    return subscribeToFiles(this.paths, onChange, log);
  }

  history(channelId: string, limit: number): Promise<Envelope[]> {
    return readHistory(this.paths, channelId, { limit });
  }

  historyIds(channelId: string): Promise<Set<string>> {
    return historyIds(this.paths, channelId);
  }

  findInHistory(channelId: string, messageId: string, maxScan: number): Promise<Envelope | null> {
    return findInHistory(this.paths, channelId, messageId, maxScan);
  }

  archive(id: string) {
    return readArchive(this.paths, id);
  }

  archiveByName(name: string) {
    return findArchiveByName(this.paths, name);
  }

  archives() {
    return listArchives(this.paths);
  }

  /** Writes the state whole now (a new snapshot and journal); operators and tests use it to
   *  leave state.json complete on its own. */
  async compact(): Promise<void> {
    if (!existsSync(this.paths.dir)) return;
    await withLock(this.paths, async (lock) => this.snapshot(await this.locked(lock), lock, []));
  }

  /** Releases the descriptors it keeps: the one that pins the cached snapshot, the history logs'. */
  async close(): Promise<void> {
    this.drop();
    closeHistoryLogs(this.paths);
  }

  // ---- reading ---------------------------------------------------------------------------------

  /** The live state brought up to date, without the lock unless something must be repaired. */
  private async current(): Promise<State> {
    if (this.options.fastPath === false) this.drop();
    for (;;) {
      const hit = this.fromCache();
      if (hit) return hit;
      const seen = this.cache;
      const snap = this.damage === null && this.note === null ? await loadLockFree(this.paths) : null;
      // Another call of this process loaded (or a mutation wrote) meanwhile: use that, never
      // put an older snapshot in its place.
      if (this.cache !== seen) {
        unpin(snap?.pin);
        continue;
      }
      if (snap && this.adopt(snap) && this.note === null) return this.cache!.state;
      await ensureDir(this.paths);
      return withLock(this.paths, (lock) => this.locked(lock));
    }
  }

  /** Under the lock: up to date, with a corrupt snapshot or journal recovered, and a journal cut
   *  under this process recorded. */
  private async locked(lock: HeldLock): Promise<State> {
    if (this.options.fastPath === false) this.drop();
    const hit = this.note === null ? this.fromCache() : null;
    if (hit && this.atEnd()) return hit;
    if (this.damage === null) {
      const snap = await loadLocked(this.paths, { guard: () => lock.assertHeld() });
      if (this.adopt(snap)) {
        if (this.note !== null) await this.recordNote(lock);
        return this.cache!.state;
      }
    }
    await this.recoverJournal(lock);
    return this.locked(lock);
  }

  /** Under the lock, before a mutation runs on the cache: the journal still holds what this
   *  process read (its tail is where it left it), and its size is noted for the append. A stat
   *  said nothing was appended, but a journal cut and written again may have the same length.
   *  false: it was cut (the cache is dropped, the cut noted). */
  private atEnd(): boolean {
    const c = this.cache!;
    c.size = null;
    if (!c.journalId) return true;
    try {
      c.size = this.journal.end(this.paths, c.journalId, c.offset, c.tail);
      return true;
    } catch (e) {
      if (!(e instanceof JournalCut)) throw e;
      this.noteCut(c, e.message);
      return false;
    }
  }

  private noteCut(c: Cache, cause: string) {
    this.note = {
      reason: 'journal_cut',
      message: `journal/${c.journalId}.jsonl was cut under this process (${cause}); it had applied ${c.count} entries of it, and what the journal holds now was loaded instead. Entries after the cut that no process wrote again are lost; check the recent messages.`,
    };
    this.drop();
  }

  /** Writes the note into the state loaded after the damage, as a new snapshot (which also
   *  leaves a journal that is whole again). */
  private async recordNote(lock: HeldLock) {
    const c = this.cache!;
    raw(c.state).errors.push({ at: Date.now(), ...this.note! });
    await this.snapshot(c.state, lock, null);
    this.note = null;
  }

  /** The cached state with what other processes appended since applied; null when it must be
   *  loaded again (the snapshot changed with no seal to follow: the cache is dropped) or repaired
   *  (a damaged journal: the cache, good part applied, is kept for the repair). */
  private fromCache(): State | null {
    if (this.advance() === 'current') {
      storeStats.cacheHits++;
      return this.cache!.state;
    }
    if (this.cache && this.damage === null) this.drop();
    return null;
  }

  /** What was appended to the cached snapshot's journal since it was last read, applied; false
   *  when the cache had to be dropped. */
  private applyAppended(c: Cache): boolean {
    if (!c.journalId) return true;
    const file = journalFile(this.paths, c.journalId);
    const size = statSync(file, { throwIfNoEntry: false })?.size;
    if (size === undefined) {
      if (c.offset === 0 && !c.created) return true; // nothing appended to this snapshot yet
      this.drop(); // compacted away between our two stats, or lost: the load says which
      return false;
    }
    return size === c.offset || this.applyJournal(c, file);
  }

  /** Between calls, what `peek` does, except that a snapshot replaced while the journal this
   *  process holds has no seal yet and the lock is held (a compaction between its rename and its
   *  seal) is left for the next tick or call: a process catching up right after a call would otherwise
   *  read the whole new snapshot inside that window and keep its heap for nothing. A read owes its
   *  caller what is on disk and never skips; this answers nobody. A process further behind (its
   *  journal sealed for a snapshot replaced since) loads. */
  async catchUp(): Promise<boolean> {
    const before = this.cache;
    const count = before?.count;
    const r = this.advance();
    if (r !== 'current' && !(r === 'unsealed' && lockHeld(this.paths))) await this.current();
    return this.cache !== before || this.cache?.count !== count;
  }

  /** Journal lines applied and a compaction's seal followed, never a load: 'current' then;
   *  'unsealed' when the snapshot was replaced and the journal held has no seal yet; 'load' for
   *  anything else (nothing cached, a seal for another snapshot, a damaged journal). Every read
   *  starts with it (`fromCache`), the background catch-up too, and it runs each time this process
   *  finds the lock held: the holders' lines are applied before it takes the lock. A load there cost four MCP writers a sixth of their rate (it met compactions
   *  between their rename and their seal); under the lock the load is done anyway. */
  private advance(): 'current' | 'unsealed' | 'load' {
    const c = this.cache;
    if (!c || this.damage !== null) return 'load';
    const key = statKey(this.paths.state);
    const replaced = c.pin ? !key || !sameKey(key, c.pin.key) : key !== null;
    c.size = null;
    if (replaced) {
      const sealed = key ? this.followSeal(c, key) : 'load';
      if (sealed !== 'followed') return sealed;
    }
    return this.applyAppended(c) ? 'current' : 'load';
  }

  /** state.json changed. When this process reads the journal it holds to that journal's end, and
   *  the end is the seal a compaction wrote naming this very file, the state in memory already is
   *  that snapshot: it is pinned and adopted without being read. Reading it cost every other
   *  process a full parse and validation per compaction (50–100 ms with a few thousand envelopes
   *  pending). 'unsealed': the journal ends without a seal (none written yet, or a malformed one);
   *  'load': no journal, or a seal naming another file (the cache untouched), or a bad entry
   *  before the seal or the file gone (the cache dropped). Either way the caller that must be
   *  current loads the snapshot whole. */
  private followSeal(c: Cache, key: FileKey): 'followed' | 'unsealed' | 'load' {
    if (!c.journalId) return 'load';
    const r = readJournal(journalFile(this.paths, c.journalId), c.offset, c.count + 1, c.tail);
    if (r.kind !== 'ok') return 'load';
    const last = r.entries.at(-1);
    const seal = last ? sealOf(last) : null;
    if (!seal) return 'unsealed';
    if (!sameKey(seal.key, key)) return 'load';
    // the entries replayed: the cache is ahead of its offset
    const fail = () => {
      this.drop();
      return 'load' as const;
    };
    for (const entry of r.entries) if (this.replay(c.state, entry)) return fail();
    let pin: Pinned;
    try {
      pin = pinFile(this.paths.state);
    } catch {
      return fail(); // gone since the stat: the next load says what is there
    }
    if (!sameKey(pin.key, seal.key)) {
      unpin(pin); // replaced again since the stat: a later snapshot, loaded whole
      return fail();
    }
    unpin(c.pin);
    Object.assign(c, { pin, journalId: seal.journal, created: true, offset: 0, count: 0, tail: NO_TAIL });
    this.journal.close();
    storeStats.sealsFollowed++;
    return 'followed';
  }

  /** Takes a freshly loaded snapshot as the cache and applies its journal. false = the journal is
   *  damaged (the good part is applied; `damage` says why). */
  private adopt(snap: Snapshot): boolean {
    this.drop();
    const c: Cache = {
      state: snap.state,
      pin: snap.pin,
      journalId: snap.journalId,
      created: snap.journalCreated,
      offset: 0,
      count: 0,
      tail: NO_TAIL,
      size: null,
    };
    this.cache = c;
    if (!c.journalId) return true;
    const file = journalFile(this.paths, c.journalId);
    if (c.created && !existsSync(file) && this.stillCurrent(c)) {
      this.note = {
        reason: 'journal_missing',
        message: `journal/${c.journalId}.jsonl, which continued state.json, is gone: the state as of that snapshot was loaded, and what was written after it is lost; check the recent messages.`,
      };
      return true;
    }
    return this.applyJournal(c, file);
  }

  /** state.json is still the snapshot cached (not replaced since it was read, by a compaction
   *  that may since have removed the journal the cache names). */
  private stillCurrent(c: Cache): boolean {
    const key = statKey(this.paths.state);
    return key !== null && c.pin !== null && sameKey(key, c.pin.key);
  }

  private applyJournal(c: Cache, file: string): boolean {
    const r = readJournal(file, c.offset, c.count + 1, c.tail);
    if (r.kind === 'absent') {
      if (c.offset === 0) return true;
      this.drop();
      return false;
    }
    if (r.kind === 'cut') {
      this.noteCut(c, r.cause);
      return false;
    }
    for (const entry of r.entries) {
      const problem = this.replay(c.state, entry);
      if (problem) {
        this.damage = `entry ${entry.n}: ${problem}`;
        return false;
      }
      c.count++;
      storeStats.linesApplied++;
    }
    c.offset = r.offset;
    c.tail = r.tail;
    if (r.kind === 'corrupt') {
      this.damage = r.cause;
      return false;
    }
    return true;
  }

  /** Applies one journal entry and checks what it touched, as a writer checks before writing. */
  private replay(state: State, entry: Entry): string | null {
    let undo: () => void = () => {};
    let problem: string | null;
    try {
      undo = applyOps(state, entry.ops);
      problem = checkOps(state, entry.ops, false).problem;
    } catch (e) {
      problem = `cannot be applied (${(e as Error).message})`;
    }
    if (problem) undo(); // the state before the damage is what recovery keeps
    return problem;
  }

  /** A damaged journal: the state up to the damage is kept, and a new snapshot (with an error
   *  naming the journal's backup) replaces them (protocol.md "Loading (fail-closed)", for the journal). The journal is copied to
   *  its backup first, the snapshot written next, and the journal removed by that snapshot last:
   *  at every step the old snapshot and its journal, or their replacement, are where a reader
   *  looks for them. */
  private async recoverJournal(lock: HeldLock) {
    const c = this.cache!;
    const cause = this.damage ?? 'unknown damage';
    const at = Date.now();
    const damaged = c.journalId;
    const kept = `${damaged}.corrupt.${at}.jsonl`;
    if (damaged) {
      try {
        writeAtomicSync(join(this.paths.journal, kept), readFileSync(journalFile(this.paths, damaged)), {
          tmpPrefix: '.journal',
          durable: this.durable,
          guard: () => lock.assertHeld(),
        });
      } catch (e) {
        throw writeError(e, `journal/${kept}`);
      }
    }
    raw(c.state).errors.push({
      at,
      reason: 'state_corrupt',
      message: `The state journal was damaged (${cause}); it was preserved as journal/${kept} and the state before the damage was kept.`,
    });
    this.damage = null;
    await this.snapshot(c.state, lock, null);
  }

  /** Under test: what is on disk, loaded afresh, must equal what this process holds. A write the
   *  tracker did not record (a change through a plain reference) fails the mutation here. */
  private async verify(state: State) {
    const counted = { ...storeStats }; // the check's own loads are not the store's
    const fresh = new FileStore(this.paths.project, { durability: this.durability });
    const disk = await fresh.read();
    await fresh.close();
    Object.assign(storeStats, counted);
    // Compared as data: a map the engine built may have a null prototype, one read from JSON not.
    if (!isDeepStrictEqual(disk, structuredClone(raw(state)))) {
      this.drop();
      throw new Error('journal check: the state on disk differs from the state in memory (a write was not recorded)');
    }
  }

  private drop() {
    if (this.cache) unpin(this.cache.pin);
    this.cache = null;
    this.journal.close();
  }

  // ---- writing ---------------------------------------------------------------------------------

  /** The state after a mutation, on disk: one journal line, or a new snapshot when the journal
   *  is due for compaction (or this snapshot has none yet). Synchronous unless a rename must be
   *  retried: nothing else of this process may run while memory is ahead of disk. */
  private async persist(state: State, ops: Op[], lock: HeldLock): Promise<void> {
    const c = this.cache!;
    if (!c.journalId || c.offset >= (this.options.compactBytes ?? JOURNAL_COMPACT_BYTES))
      return this.snapshot(state, lock, ops);
    const opts = {
      durable: this.durable,
      guard: () => lock.assertHeld(),
      offset: c.offset,
      tail: c.tail,
      size: c.size,
    };
    const end = this.journal.append(this.paths, c.journalId, { n: c.count + 1, ops }, opts);
    Object.assign(c, { offset: end.offset, tail: end.tail, size: null, count: c.count + 1 });
  }

  /** Writes `state` whole as state.json with a new journal id, and removes the old journals. A
   *  rename that fails is retried (protocol.md "Writing") with the cache dropped, so that meanwhile this process
   *  reads what is on disk, not what it failed to write; afterwards it reloads. With `seal` (the
   *  ops of the mutation that the snapshot holds and the journal does not), the journal it ends
   *  gets a last line with those ops naming the new file (followSeal), and is kept until the next
   *  compaction, so that processes up to date need not read the snapshot. A recovery does not
   *  seal: its state is what no journal holds. */
  private async snapshot(state: State, lock: HeldLock, seal: Op[] | null): Promise<void> {
    const c = this.cache!;
    const id = randomBytes(8).toString('hex');
    const opts = { tmpPrefix: '.state', durable: this.durable, guard: () => lock.assertHeld() };
    // The journal exists before the snapshot that names it (`journal_created`): a reader that
    // then finds it absent knows it was lost.
    try {
      makeDir(this.paths.journal, this.durable);
      closeQuietly(openAppend(journalFile(this.paths, id), this.durable));
    } catch (e) {
      throw writeError(e, 'the journal');
    }
    try {
      writeAtomicSync(this.paths.state, serializeChunks(raw(state), id), opts);
    } catch (e) {
      if (lock.compromised) throw e;
      this.drop();
      try {
        await writeAtomic(this.paths.state, serialize(raw(state), id), {
          ...opts,
          delays: RENAME_RETRY_DELAYS_MS.slice(1),
        });
      } catch (again) {
        this.removeJournals([], [id]);
        throw writeError(again, 'state.json');
      }
      this.removeJournals([id]);
      return;
    }
    // Renamed: every reader sees the new snapshot now, and the operation is done whatever fails
    // after. A pin that cannot be taken only costs this process a load.
    let pin: Pinned;
    try {
      pin = pinFile(this.paths.state);
    } catch {
      this.drop();
      this.removeJournals([id]);
      return;
    }
    const sealed = seal !== null && c.journalId !== null && this.seal(c, seal, { journal: id, key: pin.key }, lock);
    const ended = c.journalId;
    unpin(c.pin);
    Object.assign(c, { pin, journalId: id, created: true, offset: 0, count: 0, tail: NO_TAIL, size: null });
    this.journal.close();
    this.removeJournals(sealed && ended ? [id, ended] : [id]);
  }

  /** Appends the seal to the journal the snapshot ends. The snapshot is on disk already: a seal
   *  that cannot be written is no error (readers load the snapshot whole, as before seals). */
  private seal(c: Cache, ops: Op[], seal: Seal, lock: HeldLock): boolean {
    try {
      const entry = { n: c.count + 1, ops, sealed: sealLine(seal) };
      this.journal.append(this.paths, c.journalId!, entry, {
        durable: this.durable,
        guard: () => lock.assertHeld(),
        offset: c.offset,
        tail: c.tail,
        size: c.size,
      });
      return true;
    } catch {
      return false;
    }
  }

  /** Every journal but those in `keep` is inside the snapshot now (a crash before this leaves
   *  files behind, never state); damaged ones stay for the operator. A file that cannot be
   *  removed stays too: the snapshot names another journal, and the next compaction tries again.
   *  With `only`, just those ids (a snapshot that failed removes the journal it created). */
  private removeJournals(keep: string[], only?: string[]) {
    for (const f of listJournals(this.paths)) {
      if (keep.some((k) => f === `${k}.jsonl`) || f.includes('.corrupt.')) continue;
      if (only && !only.some((k) => f === `${k}.jsonl`)) continue;
      try {
        storeFs.unlinkSync(join(this.paths.journal, f));
      } catch {
        // see above
      }
    }
  }
}

/** A failed write as the store reports it: a file-system error (with its code) becomes a
 *  StoreWriteError; refusals and the store's own errors pass as they are. */
function writeError(e: unknown, what: string): unknown {
  if (
    e instanceof StoreWriteError ||
    e instanceof RefusalError ||
    typeof (e as NodeJS.ErrnoException)?.code !== 'string'
  )
    return e;
  return new StoreWriteError(codeOf(e), what, e);
}

export type Inspection =
  | { kind: 'absent' }
  | { kind: 'ok'; state: State; journal: { id: string | null; entries: number; bytes: number } }
  | { kind: 'corrupt'; cause: string }
  | { kind: 'refused'; reason: string; message: string };

/** The state as a load would see it (the snapshot and its journal, fail-closed), repairing
 *  nothing: for doctor, which reports damage instead of recovering it. */
export async function inspectState(projectDir: string): Promise<Inspection> {
  const paths = resolvePaths(projectDir);
  let r;
  try {
    r = await readStateFile(paths);
  } catch (e) {
    if (e instanceof RefusalError)
      return { kind: 'refused', reason: String(e.refusal.data?.reason), message: e.refusal.message };
    throw e;
  }
  if (r.kind === 'absent') {
    const lost = lostSnapshot(paths);
    return lost ? { kind: 'corrupt', cause: lost } : r;
  }
  if (r.kind !== 'ok') return { kind: 'corrupt', cause: r.cause };
  unpin(r.pin);
  if (!r.journalId) return { kind: 'ok', state: r.state, journal: { id: null, entries: 0, bytes: 0 } };
  const j = readJournal(journalFile(paths, r.journalId), 0, 1);
  if (j.kind === 'cut') return { kind: 'corrupt', cause: `journal: ${j.cause}` }; // not from offset 0: changed while read
  if (j.kind === 'absent')
    return r.journalCreated
      ? { kind: 'corrupt', cause: `journal/${r.journalId}.jsonl, which continues state.json, is gone` }
      : { kind: 'ok', state: r.state, journal: { id: r.journalId, entries: 0, bytes: 0 } };
  for (const entry of j.entries) {
    applyOps(r.state, entry.ops);
    const problem = checkOps(r.state, entry.ops, false).problem;
    if (problem) return { kind: 'corrupt', cause: `journal entry ${entry.n}: ${problem}` };
  }
  if (j.kind === 'corrupt') return { kind: 'corrupt', cause: `journal: ${j.cause}` };
  return { kind: 'ok', state: r.state, journal: { id: r.journalId, entries: j.entries.length, bytes: j.offset } };
}

const listJournals = (paths: StorePaths): string[] => {
  try {
    return readdirSync(paths.journal);
  } catch {
    return [];
  }
};
