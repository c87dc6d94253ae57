// `opencomms watch --inspect` with no receiver named: a page on loopback that shows Stately
// Inspector and feeds it. Like `createInspectorServer` of `@statelyai/inspect/server`, but it
// listens on 127.0.0.1 only (that one listens on every interface), opens no browser by itself, and
// carries the events by server-sent events instead of a WebSocket. The page embeds Stately's
// inspector (https://stately.ai/inspect) in a frame and posts each event to it once the frame said
// `@statelyai.connected`, as the library's browser inspector does.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import { isLoopbackHost } from '../console/guard.ts';
import type { StatelyInspector } from './send.ts';

export const STATELY_INSPECTOR_URL = 'https://stately.ai/inspect';
/** Events kept for a page that opens later (or reloads): every registration of the project's
 *  actors comes first, so a page opened within this many events sees them all. */
export const BRIDGE_REPLAY_EVENTS = 10_000;

export interface Bridge {
  url: string;
  inspector: StatelyInspector;
  close(): Promise<void>;
}

const page = (inspectorUrl: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>OpenComms in Stately Inspector</title>
<style>html,body{height:100%;margin:0}iframe{width:100%;height:100%;border:0}</style></head>
<body><iframe id="inspector" src="${inspectorUrl.replace(/[&"<>]/g, (c) => `&#${c.charCodeAt(0)};`)}"></iframe>
<script type="module" src="/bridge.js"></script></body></html>`;

/** The page's script: events from /events, posted to the frame once it is connected. */
const SCRIPT = `const frame = document.getElementById('inspector');
const origin = new URL(frame.src).origin; // only the inspector's page may receive the events
const waiting = [];
let connected = false;
window.addEventListener('message', (e) => {
  if (e.source !== frame.contentWindow || e.origin !== origin || e.data?.type !== '@statelyai.connected') return;
  connected = true;
  for (const ev of waiting.splice(0)) frame.contentWindow.postMessage(ev, origin);
});
new EventSource('/events').addEventListener('inspect', (m) => {
  const ev = JSON.parse(m.data);
  if (connected) frame.contentWindow.postMessage(ev, origin);
  else waiting.push(ev);
});
`;

export async function startBridge(opts: { port?: number; inspectorUrl?: string } = {}): Promise<Bridge> {
  const inspectorUrl = opts.inspectorUrl ?? STATELY_INSPECTOR_URL;
  const sent: string[] = [];
  const clients = new Set<ServerResponse>();
  const inspector = createInspector({
    send(e: StatelyInspectionEvent) {
      const frame = `event: inspect\ndata: ${JSON.stringify(e)}\n\n`;
      sent.push(frame);
      if (sent.length > BRIDGE_REPLAY_EVENTS) sent.shift();
      for (const c of clients) c.write(frame);
    },
  });
  const origin = new URL(inspectorUrl).origin;
  const server = createServer((req, res) => {
    // DNS rebinding: only a loopback name reaches this page.
    if (!isLoopbackHost(req.headers.host)) return void res.writeHead(403).end('Forbidden: not a loopback Host.\n');
    const path = new URL(req.url ?? '/', 'http://bridge.invalid').pathname;
    const headers = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
    if (path === '/events') {
      res.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8' });
      for (const f of sent) res.write(f);
      clients.add(res);
      res.on('close', () => clients.delete(res));
      return;
    }
    if (path === '/bridge.js')
      return void res.writeHead(200, { ...headers, 'content-type': 'text/javascript; charset=utf-8' }).end(SCRIPT);
    if (path !== '/') return void res.writeHead(404, headers).end('Not found.\n');
    res.writeHead(200, {
      ...headers,
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': `default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; frame-src ${origin}`,
    });
    res.end(page(inspectorUrl));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    inspector,
    async close() {
      for (const c of clients) c.end();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
