// Server-sent events of the console (GET /api/events; operator.md "The console"): `hello` on connect,
// `refresh` whenever the state or an archive changed (any process: the store's subscription) or the
// console itself acted, and a `: ping` comment every SSE_PING_MS so idle connections stay open.
import type { ServerResponse } from 'node:http';

/** A ping every 10 s, well inside the idle timeouts of browsers and proxies (protocol.md "Rules and defaults"). */
export const SSE_PING_MS = 10_000;

export type RefreshReason =
  | 'channel_created'
  | 'channel_deleted'
  | 'channel_saved'
  | 'channel_restored'
  | 'channel_paused'
  | 'channel_unpaused'
  | 'member_removed'
  | 'message_sent'
  | 'wakes_released';

export class EventHub {
  private readonly clients = new Set<ServerResponse>();
  private readonly ping: NodeJS.Timeout;

  constructor() {
    this.ping = setInterval(() => this.write(': ping\n\n'), SSE_PING_MS);
    this.ping.unref();
  }

  get size(): number {
    return this.clients.size;
  }

  add(res: ServerResponse, hello: object): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(frame('hello', hello));
    this.clients.add(res);
    res.on('close', () => this.clients.delete(res));
  }

  refresh(data: { at: number } | { reason: RefreshReason }): void {
    this.write(frame('refresh', data));
  }

  close(): void {
    clearInterval(this.ping);
    for (const c of this.clients) c.end();
    this.clients.clear();
  }

  private write(text: string) {
    for (const c of this.clients) c.write(text);
  }
}

const frame = (event: string, data: object) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
