// GET /api/channels/:name/inspect (docs/stately.md): one live channel's actors as Stately inspection
// events, by server-sent events (`inspect`, one event each). The events are made here, by
// `@statelyai/inspect`'s own `createInspector` fed from watch's looks (src/inspect/), on a
// subscription of this stream's own; the page only relays them to the Stately Inspector window it
// opened (postMessage, after the window said `@statelyai.connected`). A stream ends when the page
// closes it or the console stops.
import type { ServerResponse } from 'node:http';
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import { normaliseChannelName } from '../engine/lookup.ts';
import { inspectStore } from '../inspect/send.ts';
import type { Store, Subscription } from '../store/index.ts';

export const INSPECT_PATH = /^\/api\/channels\/([^/]+)\/inspect$/;

const decoded = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return null; // a malformed %-escape names no channel
  }
};

const frame = (event: string, data: object) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

export class InspectStreams {
  private readonly open = new Set<{ res: ServerResponse; sub: Promise<Subscription | null> }>();

  constructor(
    private readonly store: Store,
    private readonly log: (line: string) => void,
  ) {}

  /** Answers the request: 404 for a channel that is not live, else the stream. `encoded`: the
   *  path's name, still %-escaped. */
  async add(res: ServerResponse, encoded: string, notFound: (message: string) => void): Promise<void> {
    const raw = decoded(encoded);
    const name = raw === null ? null : normaliseChannelName(raw);
    const ch = name === null ? undefined : (await this.store.read()).channels[name];
    if (!name || !ch || ch.lifecycle !== 'active')
      return notFound(`No live channel "${raw ?? encoded}" to inspect: a saved or deleted one no longer moves.`);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(frame('hello', { channel: name }));
    const inspector = createInspector({
      send: (e: StatelyInspectionEvent) => void res.write(frame('inspect', e)),
    });
    const entry = {
      res,
      sub: inspectStore(this.store, inspector, { channel: name, log: this.log }).catch((e: unknown) => {
        this.log(`inspect stream of "${name}" failed: ${(e as Error).message}`);
        res.end();
        return null;
      }),
    };
    this.open.add(entry);
    res.on('close', () => {
      this.open.delete(entry);
      void entry.sub.then((s) => s?.close());
    });
  }

  async close(): Promise<void> {
    const all = [...this.open];
    this.open.clear();
    for (const e of all) e.res.end();
    await Promise.all(all.map((e) => e.sub.then((s) => s?.close())));
  }
}
