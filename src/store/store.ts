// The store the runtime uses: lock-free reads, locked mutations, and a fast path that skips
// parse + validation when state.json is still the file this process last read or wrote.
import { appendHistory, deleteHistory, findInHistory, readHistory } from './history-log.ts';
import { deleteArchive, findArchiveByName, listArchives, readArchive, writeArchive } from './archives.ts';
import { loadLockFree, loadLocked } from './load.ts';
import type { Loaded, LoadOptions } from './load.ts';
import { withLock } from './lock.ts';
import type { HeldLock } from './lock.ts';
import { ensureDir, resolvePaths } from './paths.ts';
import type { StorePaths } from './paths.ts';
import { sameKey, saveState, serialize, statKey, storeStats, unpin } from './state-file.ts';
import type { Pinned } from './state-file.ts';
import type { AtomicFsOps } from './atomic.ts';
import { parseState } from '../protocol/schema.ts';
import type { Envelope, State } from '../protocol/schema.ts';
import type { MutateOutcome, Store, Watch, WatchChange } from './types.ts';
import { watchStateFile } from './watch.ts';

const VALIDATE_ON_SAVE = process.env.OPENCOMMS_VALIDATE_SAVE === '1' || process.env.VITEST !== undefined;

export interface FileStoreOptions {
  /** false = always re-read and re-validate (benchmarks, debugging). */
  fastPath?: boolean;
  /** Tests inject a failing rename here. */
  fsOps?: AtomicFsOps;
}

/** The state as this process last saw it on disk: either the validated object, or the exact
 *  (validated, backfilled) text it saved, parsed on use: as cheap as a structuredClone and sharing
 *  nothing with the caller's draft or result. */
interface Cached {
  pin: Pinned;
  state?: State;
  text?: string;
}

export class FileStore implements Store {
  readonly paths: StorePaths;
  private cache: Cached | null = null;

  constructor(projectDir: string, private readonly options: FileStoreOptions = {}) {
    this.paths = resolvePaths(projectDir);
  }

  get location(): string {
    return this.paths.project;
  }

  /** Lock-free and fail-closed; takes the lock only to recover a corrupt file or to migrate. */
  async read(): Promise<State> {
    const l = await loadLockFree(this.paths, this.loadOptions());
    if (l) return this.keep(l);
    await ensureDir(this.paths);
    return withLock(this.paths, async (lock) => this.keep(await loadLocked(this.paths, this.loadOptions(lock))));
  }

  /** Like read(), but when state.json is still the file this process last read or wrote it
   *  returns the cached object itself, with no copy. The caller must treat it as read-only. */
  async peek(): Promise<Readonly<State>> {
    const c = this.cache;
    if (c) {
      const key = await statKey(this.paths.state);
      if (key && this.cache === c && sameKey(key, c.pin.key)) {
        storeStats.cacheHits++;
        return (c.state ??= JSON.parse(c.text!) as State);
      }
    }
    return this.read();
  }

  /** fn gets a private draft to change in place; nothing is written unless it reports a change,
   *  and nothing at all if it throws. */
  async mutate<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    await ensureDir(this.paths);
    return withLock(this.paths, async (lock) => {
      const opts = this.loadOptions(lock);
      const draft = this.keep(await loadLocked(this.paths, opts));
      const out = fn(draft);
      if (!out.changed) return out.result;
      // Under test (and with OPENCOMMS_VALIDATE_SAVE=1) every state is validated before it is
      // written, so an engine bug fails the call instead of writing a file other processes would
      // reset as corrupt. In production the check is skipped: it was a third of a send's cost,
      // and every load from disk still validates.
      let next = draft;
      if (VALIDATE_ON_SAVE) {
        const valid = parseState(draft);
        if (!valid.ok) throw new Error(`refusing to save an invalid state (${valid.cause}); nothing was written`);
        next = valid.state;
      }
      if (out.history?.length) {
        lock.assertHeld();
        // Log first: a crash before the save duplicates a log line (de-duplicated on read)
        // instead of losing the envelopes.
        await appendHistory(this.paths, out.history);
      }
      if (out.archive) {
        lock.assertHeld();
        await writeArchive(this.paths, out.archive);
      }
      const text = serialize(next);
      this.setCache({ pin: await saveState(this.paths, text, opts), text });
      // Deletions follow the save: a crash in between leaves an orphan file, never a live
      // channel whose archive is gone.
      if (out.deleteArchive) await deleteArchive(this.paths, out.deleteArchive);
      for (const id of out.deleteHistory ?? []) await deleteHistory(this.paths, id);
      return out.result;
    });
  }

  async watch(onChange: (change: WatchChange) => Promise<void>, log: (line: string) => void): Promise<Watch> {
    // A watcher may start before anything was written (a console on a fresh project): the
    // directory must exist for the file watch to see state.json appear.
    await ensureDir(this.paths);
    return watchStateFile(this.paths, onChange, log);
  }

  history(channelId: string, limit: number): Promise<Envelope[]> {
    return readHistory(this.paths, channelId, { limit });
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

  /** Releases the descriptor that pins the cached file. */
  async close(): Promise<void> {
    this.setCache(null);
  }

  private loadOptions(lock?: HeldLock): LoadOptions {
    return {
      cached: this.fromCache,
      guard: lock && (() => lock.assertHeld()),
      fsOps: this.options.fsOps,
    };
  }

  private fromCache = async (): Promise<State | null> => {
    const c = this.cache;
    if (!c) return null;
    const key = await statKey(this.paths.state);
    // `this.cache === c` after the await: c's descriptor was still open during the stat, so its
    // inode number could not have been reused by another file.
    if (!key || this.cache !== c || !sameKey(key, c.pin.key)) return null;
    storeStats.cacheHits++;
    return c.state ? structuredClone(c.state) : (JSON.parse(c.text!) as State);
  };

  /** Caches what a load produced and hands the caller a state it owns. */
  private keep(l: Loaded): State {
    if (this.options.fastPath === false) {
      if (l.from === 'disk' || l.from === 'saved') unpin(l.pin);
    } else if (l.from === 'disk') this.setCache({ pin: l.pin, state: structuredClone(l.state) });
    else if (l.from === 'saved') this.setCache({ pin: l.pin, text: l.text });
    return l.state;
  }

  private setCache(c: Cached | null) {
    if (c && this.options.fastPath === false) {
      unpin(c.pin);
      return;
    }
    if (this.cache && this.cache.pin !== c?.pin) unpin(this.cache.pin);
    this.cache = c;
  }
}

