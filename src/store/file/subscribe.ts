// Owner-side wake: calls `onChange` when another process changed the state, i.e. appended to the
// journal (journal/<id>.jsonl) or replaced the snapshot (state.json), or wrote or removed an
// archive; plus a periodic rescan as a safety net. Node's own fs.watch (inotify on Linux): one
// event per write, no polling, no throttle. No debounce either, because
// wake latency is a product figure; a change that arrives while a scan runs is coalesced into one
// follow-up scan instead.
import { watch, type FSWatcher } from 'node:fs';
import { basename } from 'node:path';
import type { StorePaths } from '../paths.ts';
import type { StoreChange, Subscription } from '../types.ts';

/** Safety-net rescan for a missed event, and the retry of a watch that could not be set up (the
 *  directory does not exist yet): the polling fallback interval. A rescan of a state
 *  this process already holds costs two stats. */
export const RESCAN_INTERVAL_MS = 500;

export async function subscribeToFiles(
  paths: StorePaths,
  onChange: (change: StoreChange) => Promise<void>,
  log: (l: string) => void,
): Promise<Subscription> {
  let running: Promise<void> | null = null;
  let again = false;
  let archives = false;
  let closed = false;
  const fire = () => {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        const change = { archives };
        archives = false;
        try {
          await onChange(change);
        } catch (e) {
          log(`wake scan failed: ${(e as Error).message}`);
        }
      } while (again && !closed);
      running = null;
    })();
  };

  const stateName = basename(paths.state);
  const subdirs = new Set([basename(paths.journal), basename(paths.archives)]);
  const watchers = new Map<string, FSWatcher>();
  const open = (dir: string, onEvent: (file: string | null) => void) => {
    if (watchers.has(dir)) return;
    try {
      // Persistent: a process that waits to deliver mail stays alive until the watch is closed.
      const w = watch(dir, { persistent: true }, (_event, file) => onEvent(file));
      w.on('error', () => {
        w.close();
        watchers.delete(dir);
      });
      watchers.set(dir, w);
    } catch {
      // not there yet: the rescan tries again
    }
  };
  const storeDir = basename(paths.dir);
  const arm = () => {
    if (closed) return;
    // Until `.opencomms/` exists (a fresh project), the project directory tells when it appears.
    if (!watchers.has(paths.dir))
      open(paths.project, (file) => {
        if (file !== storeDir) return;
        arm();
        fire();
      });
    open(paths.dir, (file) => {
      if (file === stateName) fire();
      else if (file !== null && subdirs.has(file)) {
        arm();
        fire();
      }
    });
    open(paths.journal, () => fire());
    const archivesWatched = watchers.has(paths.archives);
    open(paths.archives, (file) => {
      if (!file?.endsWith('.json')) return;
      archives = true;
      fire();
    });
    // A folder created after the watch began may hold an archive written before it was watched.
    if (armed && !archivesWatched && watchers.has(paths.archives)) archives = true;
  };
  let armed = false;
  arm();
  armed = true;
  const interval = setInterval(() => {
    arm();
    fire();
  }, RESCAN_INTERVAL_MS);
  interval.unref();
  return {
    close: async () => {
      closed = true;
      clearInterval(interval);
      for (const w of watchers.values()) w.close();
      watchers.clear();
      await running;
    },
  };
}
