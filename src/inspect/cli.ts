// `opencomms watch --inspect [ws-url]`: where the inspection events go. With no URL, a loopback page
// that shows Stately Inspector (bridge.ts); with a `ws://` URL on this machine, a WebSocket receiver
// (`@statelyai/inspect`'s `createWebSocketInspector`, e.g. to `createInspectorServer` of
// `@statelyai/inspect/server`). A receiver elsewhere is refused: inspection stays on loopback.
import { createWebSocketInspector } from '@statelyai/inspect';
import { refuse, RefusalError } from '../protocol/result.ts';
import { isLoopbackHost } from '../console/guard.ts';
import { BRIDGE_REPLAY_EVENTS, startBridge } from './bridge.ts';
import { inspectorFeed, type StatelyInspector } from './send.ts';
import type { Look } from '../cli/watch/stream.ts';

export interface InspectTarget {
  /** Where to look: the bridge page, or the receiver's URL. */
  url: string;
  feed(channel?: string): (look: Look) => void;
  close(): Promise<void>;
}

/** The receiver `--inspect` names, or the refusal that says why it is not one. */
export function receiverUrl(raw: string): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new RefusalError(
      refuse('invalid_argument', `--inspect takes a WebSocket URL such as ws://127.0.0.1:8080; "${raw}" is not a URL.`),
    );
  }
  if (u.protocol !== 'ws:')
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `--inspect takes a ws:// URL (a local WebSocket receiver); "${raw}" is ${u.protocol}.`,
      ),
    );
  if (!isLoopbackHost(u.host))
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `--inspect sends only to this computer (127.0.0.1, localhost or [::1]); "${u.hostname}" is not one.`,
      ),
    );
  return u;
}

const target = (url: string, inspector: StatelyInspector, close: () => Promise<void>): InspectTarget => ({
  url,
  feed: (channel) => inspectorFeed(inspector, channel),
  close,
});

/** `raw`: the option's value (`true` when given without one). */
export async function openInspectTarget(raw: string | true): Promise<InspectTarget> {
  if (raw === true) {
    const b = await startBridge();
    return target(b.url, b.inspector, () => b.close());
  }
  const url = receiverUrl(raw);
  const ws = createWebSocketInspector({ url: url.href, maxDeferredEvents: BRIDGE_REPLAY_EVENTS });
  return target(url.href, ws, async () => ws.stop());
}
