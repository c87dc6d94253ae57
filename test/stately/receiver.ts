// A local stand-in for Stately Inspector's WebSocket side (what `createInspectorServer` of
// `@statelyai/inspect/server` would be): a WebSocket server on 127.0.0.1 that keeps every message
// with the time it arrived. No internet: the tests never reach stately.ai.
import type { AddressInfo } from 'node:net';
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import { WebSocketServer } from 'ws';

export interface Received {
  at: number;
  text: string;
}

export interface Receiver {
  url: string;
  received: Received[];
  events(): StatelyInspectionEvent[];
  close(): Promise<void>;
}

export async function wsReceiver(): Promise<Receiver> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const received: Received[] = [];
  wss.on('connection', (ws) =>
    ws.on('message', (data) => received.push({ at: performance.timeOrigin + performance.now(), text: String(data) })),
  );
  return {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`,
    received,
    events: () => received.map((r) => JSON.parse(r.text) as StatelyInspectionEvent),
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => resolve());
      }),
  };
}
