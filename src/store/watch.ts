// Owner-side wake: a chokidar watch on `.opencomms/` that calls `onChange` when state.json is
// replaced or an archive is written or removed, plus a periodic rescan as a safety net. No debounce: FEATURES.md suggests 150 ms, but
// wake latency is a product figure (p50 ≤ 10 ms), and a change that arrives while a scan runs is
// coalesced into one follow-up scan instead.
import { watch } from 'chokidar';
import { basename, dirname } from 'node:path';
import type { StorePaths } from './paths.ts';
import type { Watch, WatchChange } from './types.ts';

/** Safety-net rescan of state.json for mail a missed watch event left behind (FEATURES.md's
 *  polling fallback interval). A rescan of a state this process already holds costs one stat. */
export const RESCAN_INTERVAL_MS = 500;

/** A trailing scan after each watch event, just past chokidar's 5 ms per-file throttle, which
 *  drops (never delays) a second change inside that window. */
export const WATCH_TRAILING_MS = 10;

export async function watchStateFile(paths: StorePaths, onChange: (change: WatchChange) => Promise<void>, log: (l: string) => void): Promise<Watch> {
  let running: Promise<void> | null = null;
  let again = false;
  let archives = false;
  const fire = () => {
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
      } while (again);
      running = null;
    })();
  };
  // chokidar drops a change that follows the previous one within 5 ms (its per-file throttle,
  // no trailing event), and two quick commits are common here: every event is followed by one
  // trailing scan just past that window.
  let trailing: NodeJS.Timeout | null = null;
  const onEvent = () => {
    fire();
    if (trailing) clearTimeout(trailing);
    trailing = setTimeout(() => {
      trailing = null;
      fire();
    }, WATCH_TRAILING_MS);
    trailing.unref();
  };
  const stateName = basename(paths.state);
  const isArchive = (p: string) => dirname(p) === paths.archives && p.endsWith('.json');
  const w = watch(paths.dir, {
    depth: 1,
    ignoreInitial: true,
    atomic: false,
    ignored: (p: string) => p !== paths.dir && p !== paths.archives && basename(p) !== stateName && !isArchive(p),
  });
  w.on('all', (event, p) => {
    if (isArchive(p)) {
      if (event !== 'add' && event !== 'change' && event !== 'unlink') return;
      archives = true;
    } else if (p !== paths.state || (event !== 'add' && event !== 'change')) return;
    onEvent();
  }).on('error', (e) => log(`watch error: ${(e as Error).message}`));
  await new Promise<void>((resolve) => w.once('ready', () => resolve()));
  const interval = setInterval(fire, RESCAN_INTERVAL_MS);
  interval.unref();
  return {
    close: async () => {
      clearInterval(interval);
      if (trailing) clearTimeout(trailing);
      await w.close();
      await running;
    },
  };
}
