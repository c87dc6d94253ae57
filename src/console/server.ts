// `opencomms gui` / `serve` (operator.md "The console"): node:http on a loopback address, one project, one
// embedded page. Every request passes the Host and cross-site checks (403, recorded in
// state.errors), a body cap (413), the route table (404 names method and path), and never shows
// a stack trace (500, details in state.errors and on stderr). The page is refreshed by SSE when
// any process changes the state or an archive (the store's subscription).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import { openRuntime, type Runtime } from '../runtime/runtime.ts';
import { GUI_PROJECT_ID, operatorActor } from '../runtime/operator.ts';
import type { Subscription } from '../store/index.ts';
import { VERSION } from '../version.ts';
import { loadAssets } from './assets.ts';
import { EventHub } from './events.ts';
import { forbidden } from './guard.ts';
import { INSPECT_PATH, InspectStreams } from './inspect.ts';
import { STATELY_INSPECTOR_URL } from '../inspect/bridge.ts';
import { DEFAULT_PORT, MAX_BODY_CHARS } from './limits.ts';
import { match } from './routes.ts';

/** Longest header text copied into an error entry: enough to recognise the origin, no more. */
const LOGGED_HEADER_CHARS = 200;

/** Everything the page may load comes from this server (operator.md "The console": no CDN, no external request). */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export interface ConsoleOptions {
  project: string;
  port?: number;
  /** The address the server listens on (default 127.0.0.1). */
  bindAddress?: string;
  /** The Stately Inspector page a channel's Inspect button opens (default https://stately.ai/inspect;
   *  the browser test points it at a local receiver). */
  inspectorUrl?: string;
  log?: (line: string) => void;
}

export interface ConsoleServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

class BodyTooLarge extends Error {}
class BadJson extends Error {}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const decoder = new StringDecoder('utf8');
    let text = '';
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return; // drained, never kept
      text += decoder.write(chunk);
      if (text.length > MAX_BODY_CHARS) {
        over = true;
        text = '';
        reject(new BodyTooLarge());
      }
    });
    req.on('end', () => {
      if (over) return;
      text += decoder.end();
      if (text.length > MAX_BODY_CHARS) reject(new BodyTooLarge());
      else resolve(text);
    });
    req.on('error', reject);
  });
}

function parseBody(text: string): Record<string, unknown> {
  if (!text.trim()) return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new BadJson();
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new BadJson();
  return v as Record<string, unknown>;
}

const header = (req: IncomingMessage, name: string) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

function send(res: ServerResponse, status: number, body: unknown, type = 'application/json; charset=utf-8') {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text), ...SECURITY_HEADERS });
  res.end(text);
}

const failure = (message: string, data?: Record<string, unknown>) => ({
  ok: false,
  message,
  ...(data ? { data } : {}),
});

/** What every request of one console is answered with. */
interface Console {
  project: string;
  rt: Runtime;
  actor: ReturnType<typeof operatorActor>;
  assets: ReturnType<typeof loadAssets>;
  events: EventHub;
  log: (line: string) => void;
  /** Records a refusal or a fault in state.errors. */
  record(reason: string, message: string): Promise<void>;
  /** The channels' Stately inspection streams (inspect.ts). */
  inspect: InspectStreams;
  inspectorUrl: string;
}

/** The request's JSON object; null when it was answered already (over the cap, not an object). */
async function bodyOf(req: IncomingMessage, res: ServerResponse): Promise<Record<string, unknown> | null> {
  try {
    return parseBody(await readBody(req));
  } catch (e) {
    if (e instanceof BodyTooLarge) {
      res.setHeader('connection', 'close');
      send(res, 413, failure(`Request body over ${MAX_BODY_CHARS} characters.`));
      return null;
    }
    if (e instanceof BadJson) {
      send(res, 400, failure('The request body is not a JSON object.', { reason: 'invalid_argument' }));
      return null;
    }
    throw e;
  }
}

/** One request: the Host and cross-site checks, its body, then the event stream, an asset or a route. */
async function handle(c: Console, req: IncomingMessage, res: ServerResponse) {
  const method = req.method ?? 'GET';
  const url = new URL(req.url ?? '/', 'http://console.invalid');
  const path = url.pathname;
  const why = forbidden({
    method,
    hostHeader: header(req, 'host'),
    origin: header(req, 'origin'),
    referer: header(req, 'referer'),
    secFetchSite: header(req, 'sec-fetch-site'),
  });
  if (why) {
    req.resume();
    await c.record(
      'console_forbidden',
      `Console refused ${method} ${path.slice(0, LOGGED_HEADER_CHARS)}: ${why.slice(0, LOGGED_HEADER_CHARS)}.`,
    );
    return send(res, 403, failure(`Forbidden: ${why}. The console answers only loopback pages.`));
  }
  const body = method === 'GET' || method === 'HEAD' ? {} : await bodyOf(req, res);
  if (body === null) return;
  if (method === 'GET' && path === '/api/events')
    return c.events.add(res, { at: Date.now(), project: c.project, version: VERSION, inspector_url: c.inspectorUrl });
  const inspected = method === 'GET' ? INSPECT_PATH.exec(path) : null;
  if (inspected)
    return c.inspect.add(res, inspected[1]!, (m) => send(res, 404, failure(m, { reason: 'channel_not_found' })));
  const asset = method === 'GET' ? c.assets.get(path) : undefined;
  if (asset) return send(res, 200, asset.body, asset.type);
  const found = match(method, path);
  if (found === null || found === 'wrong_method')
    return send(
      res,
      404,
      failure(
        `No route for ${method} ${path}.${found === 'wrong_method' ? ' That path exists for another method.' : ''}`,
        { method, path },
      ),
    );
  // A fault inside the runtime is already logged and recorded in state.errors by the runtime.
  const reply = await found.route.handler({
    rt: c.rt,
    actor: c.actor,
    params: found.params,
    query: url.searchParams,
    body,
  });
  send(res, reply.status, reply.body);
  if (reply.refresh) c.events.refresh({ reason: reply.refresh });
}

/** A fault while answering: logged and recorded, answered 500 without its details. */
async function answerFault(c: Console, req: IncomingMessage, res: ServerResponse, e: unknown) {
  c.log(`internal error in ${req.method} ${req.url}: ${(e as Error).stack ?? e}`);
  await c
    .record(
      'internal_error',
      `Console: internal error in ${req.method} ${(req.url ?? '').slice(0, LOGGED_HEADER_CHARS)}: ${(e as Error).message}`,
    )
    .catch(() => {});
  if (!res.headersSent)
    send(res, 500, failure('Internal error; the details are in the OpenComms error log (`opencomms status`).'));
  else res.end();
}

function listen(server: Server, port: number, address: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export async function startConsole(opts: ConsoleOptions): Promise<ConsoleServer> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`[opencomms-console] ${l}\n`));
  const rt: Runtime = openRuntime(opts.project, { log });
  const c: Console = {
    project: opts.project,
    rt,
    actor: operatorActor(opts.project, GUI_PROJECT_ID),
    assets: loadAssets(),
    events: new EventHub(),
    inspect: new InspectStreams(rt.store, log),
    inspectorUrl: opts.inspectorUrl ?? STATELY_INSPECTOR_URL,
    log,
    record: (reason, message) =>
      rt.run({ op: 'record_error', entry: { at: Date.now(), reason, message } }).then((r) => {
        if (!r.ok) log(`could not record "${message}": ${r.message}`);
      }),
  };
  const server = createServer((req, res) => {
    handle(c, req, res).catch((e: unknown) => answerFault(c, req, res, e));
  });

  // Any process's change (or an archive's) refreshes the page; an unchanged state (the store's
  // periodic rescan) sends nothing.
  let last: string | null = null;
  let subscription: Subscription | null = null;
  const revision = () => rt.store.revision().catch((e: Error) => e.message);
  const onChange = async (change: { archives: boolean }) => {
    const now = await revision();
    if (now !== last || change.archives) c.events.refresh({ at: Date.now() });
    last = now;
  };

  const bindAddress = opts.bindAddress ?? '127.0.0.1';
  try {
    await listen(server, opts.port ?? DEFAULT_PORT, bindAddress);
    last = await revision();
    subscription = await rt.store.subscribe(onChange, log);
  } catch (e) {
    await subscription?.close();
    server.close();
    await rt.close();
    throw e;
  }
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://${bindAddress.includes(':') ? `[${bindAddress}]` : bindAddress}:${port}/`,
    async close() {
      await subscription?.close();
      c.events.close();
      await c.inspect.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await rt.close();
    },
  };
}
