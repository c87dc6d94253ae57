// Owner-side wake: calls `onChange` when another process changed the state, i.e. appended to the
// journal (journal/<id>.jsonl) or replaced the snapshot (state.json), plus a periodic rescan as a
// safety net. Node's own fs.watch (inotify on Linux): one event per write, no polling, no
// throttle. No debounce either: FEATURES.md suggests 150 ms, but wake latency is a product
// figure; a change that arrives while a scan runs is coalesced into one follow-up scan instead.
import { watch, type FSWatcher } from 'node:fs';
import { basename } from 'node:path';
import type { StorePaths } from './paths.ts';
import type { Watch } from './types.ts';

/** Safety-net rescan for a missed event, and the retry of a watch that could not be set up (the
 *  directory does not exist yet): FEATURES.md's polling fallback interval. A rescan of a state
 *  this process already holds costs two stats. */
export const RESCAN_INTERVAL_MS = 500;

export async function watchStateFile(paths: StorePaths, onChange: () => Promise<void>, log: (l: string) => void): Promise<Watch> {
  let running: Promise<void> | null = null;
  let again = false;
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
        try {
          await onChange();
        } catch (e) {
          log(`wake scan failed: ${(e as Error).message}`);
        }
      } while (again && !closed);
      running = null;
    })();
  };

  const stateName = basename(paths.state);
  const journalName = basename(paths.journal);
  let dirWatch: FSWatcher | null = null;
  let journalWatch: FSWatcher | null = null;
  const open = (dir: string, onEvent: (file: string | null) => void): FSWatcher | null => {
    try {
      // Persistent: a process that waits to deliver mail stays alive until the watch is closed.
      const w = watch(dir, { persistent: true }, (_event, file) => onEvent(file));
      w.on('error', () => {
        w.close();
        if (w === dirWatch) dirWatch = null;
        if (w === journalWatch) journalWatch = null;
      });
      return w;
    } catch {
      return null; // not there yet: the rescan tries again
    }
  };
  const arm = () => {
    if (closed) return;
    dirWatch ??= open(paths.dir, (file) => {
      if (file === stateName) fire();
      else if (file === journalName) {
        arm();
        fire();
      }
    });
    journalWatch ??= open(paths.journal, () => fire());
  };
  arm();
  const interval = setInterval(() => {
    arm();
    fire();
  }, RESCAN_INTERVAL_MS);
  interval.unref();
  return {
    close: async () => {
      closed = true;
      clearInterval(interval);
      dirWatch?.close();
      journalWatch?.close();
      await running;
    },
  };
}
