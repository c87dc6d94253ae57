// Console test fixtures: a console on a free port over a temp project, raw HTTP requests (any
// Host, Origin or body), and an SSE reader.
import { request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { startConsole, type ConsoleServer } from '../../src/console/server.ts';
import { Arrivals } from '../helpers/arrivals.ts';

export interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

export interface Ctx {
  dir: string;
  server: ConsoleServer;
  req(
    method: string,
    path: string,
    opts?: { body?: unknown; raw?: string; headers?: Record<string, string> },
  ): Promise<Response>;
}

/** A console per test on a free port (closed and removed after it). */
export function useConsole(): Ctx {
  const ctx = {} as Ctx;
  beforeEach(async () => {
    ctx.dir = await mkdtemp(join(tmpdir(), 'oc-console-'));
    ctx.server = await startConsole({ project: ctx.dir, port: 0, log: () => {} });
    ctx.req = (method, path, opts = {}) => send(ctx.server.port, method, path, opts);
  });
  afterEach(async () => {
    await ctx.server.close();
    await rm(ctx.dir, { recursive: true, force: true });
  });
  return ctx;
}

export function send(
  port: number,
  method: string,
  path: string,
  opts: { body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  return new Promise((resolve, reject) => {
    const r = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: {
          host: `127.0.0.1:${port}`,
          ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
          ...opts.headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode!, headers: res.headers, text, json });
        });
      },
    );
    r.on('error', reject);
    if (payload !== undefined) r.write(payload);
    r.end();
  });
}

export interface SseEvent {
  event: string;
  data: any;
  at: number;
}

/** Reads /api/events; `waitFor` resolves with the first event (seen or to come) that matches. */
export async function sse(port: number) {
  const ac = new AbortController();
  const res = await fetch(`http://127.0.0.1:${port}/api/events`, { signal: ac.signal });
  const arrivals = new Arrivals<SseEvent>('SSE event');
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  void (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event) arrivals.push({ event, data: data ? JSON.parse(data) : null, at: Date.now() });
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    res,
    events: arrivals.items,
    waitFor: (pred: (e: SseEvent) => boolean, ms = 5000): Promise<SseEvent> => arrivals.next(pred, ms),
    close: () => ac.abort(),
  };
}
