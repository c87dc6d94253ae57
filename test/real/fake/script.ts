// The script language and the HTTP plumbing shared by the three fake model servers.
//
// A script is a list of lines. Each model request that is not auxiliary (see `aux` below) takes
// the next line of its conversation's queue and answers with it:
//   CALL <tool_name> <json args>   the reply is one tool call (the turn goes on: the client runs
//                                  the tool and sends the result in its next request)
//   SAY <text>                     the reply is plain text (the turn ends)
//   DELAY <ms> <line>              waits <ms> before answering with <line> (a slow model: the
//                                  client's turn stays busy that long)
// When a queue is used up, the fake falls back to an echo: `tool said: <result>` when the request
// ends with a tool result, else `echo: <last user text>`.
//
// Conversations: a script is either one queue (an array of lines, or one string with a line per
// line), or an object `{ [marker]: lines }`. A request belongs to the first marker (in insertion
// order) found in its system text or any of its user texts; a request that holds no marker takes
// the `'*'` queue (empty when not given). Put the marker in the prompt, e.g. `claude -p "[conv-A] hi"`.
// A line may also be a function of the request (for ids known only at run time), and
// `server.push(line, marker?)` appends lines while the client runs.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Api = 'anthropic' | 'responses' | 'chat';

export type Action =
  | { kind: 'call'; name: string; args: Record<string, unknown>; delayMs?: number }
  | { kind: 'say'; text: string; delayMs?: number };

export interface ToolResult {
  id: string;
  text: string;
  isError?: boolean;
}

/** One HTTP request as the fake received it, with the model-relevant parts normalized. */
export interface ModelRequest {
  api: Api;
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** The parsed JSON body (`{}` when empty or not JSON). */
  body: any;
  /** Epoch ms when the whole request body had arrived. */
  at: number;
  /** Epoch ms when the reply was completely written (unset for non-model requests). */
  repliedAt?: number;
  /** True for POSTs to the model endpoint; other paths (models list, count_tokens, …) are false. */
  isModelCall: boolean;
  /** All system / developer text, joined with newlines. */
  system: string;
  /** Every user text in the conversation, in order (tool results excluded). */
  userTexts: string[];
  /** Every tool result the request carries, in order. */
  toolResults: ToolResult[];
  /** True when the request's last input item is a tool result (the client is continuing a turn). */
  endsWithToolResult: boolean;
  /** Names of the tools offered. Responses-API namespaces are flattened as `<namespace>__<name>`. */
  tools: string[];
  /** Auxiliary request (title generation and the like): answered without consuming a script line. */
  aux: boolean;
  /** The marker of the conversation whose queue answered, `'*'` for the default one. */
  conversation?: string;
  /** What the fake answered (unset for non-model requests). */
  reply?: Action;
  /** True when the reply came from the echo fallback (the queue was used up). */
  fallback?: boolean;
}

export type Line = string | ((req: ModelRequest) => string);
export type Script = string | Line[] | Record<string, string | Line[]>;

export interface FakeServer {
  /** `http://127.0.0.1:<port>` (no trailing slash, no `/v1`). */
  url: string;
  port: number;
  /** Every request received, in order (model requests and others). */
  requests: ModelRequest[];
  /** The requests to the model endpoint, auxiliary ones included. */
  modelRequests(): ModelRequest[];
  /** The scripted requests: model requests that are not auxiliary. */
  turns(): ModelRequest[];
  /** Appends a line to a conversation's queue (default `'*'`). */
  push(line: Line, marker?: string): void;
  /** Lines not yet used, per conversation. */
  remaining(): Record<string, number>;
  close(): Promise<void>;
}

export function parseLine(line: string): Action {
  const d = /^\s*DELAY\s+(\d+)\s+([\s\S]*)$/.exec(line);
  if (d) return { ...parseLine(d[2]), delayMs: Number(d[1]) };
  const m = /^\s*(CALL|SAY)\b ?([\s\S]*)$/.exec(line);
  if (!m) throw new Error(`fake script: a line must start with CALL or SAY: ${JSON.stringify(line)}`);
  if (m[1] === 'SAY') return { kind: 'say', text: m[2] };
  const call = /^(\S+)\s*([\s\S]*)$/.exec(m[2].trim());
  if (!call) throw new Error(`fake script: CALL needs a tool name: ${JSON.stringify(line)}`);
  let args: unknown = {};
  if (call[2].trim()) {
    try {
      args = JSON.parse(call[2]);
    } catch (e) {
      throw new Error(`fake script: CALL args are not JSON: ${JSON.stringify(line)} (${String(e)})`);
    }
  }
  if (!args || typeof args !== 'object' || Array.isArray(args))
    throw new Error(`fake script: CALL args must be a JSON object: ${line}`);
  return { kind: 'call', name: call[1], args: args as Record<string, unknown> };
}

const toLines = (s: string | Line[]): Line[] =>
  typeof s === 'string' ? s.split('\n').filter((l) => l.trim() !== '') : [...s];

export class ScriptBook {
  private readonly queues = new Map<string, Line[]>();

  constructor(script: Script = []) {
    if (typeof script === 'string' || Array.isArray(script)) this.queues.set('*', toLines(script));
    else for (const [k, v] of Object.entries(script)) this.queues.set(k, toLines(v));
    if (!this.queues.has('*')) this.queues.set('*', []);
    // Validate static lines now, so a typo fails the test before any client runs.
    for (const q of this.queues.values()) for (const l of q) if (typeof l === 'string') parseLine(l);
  }

  conversationOf(req: ModelRequest): string {
    const hay = [req.system, ...req.userTexts].join('\n');
    for (const k of this.queues.keys()) if (k !== '*' && hay.includes(k)) return k;
    return '*';
  }

  push(line: Line, marker = '*'): void {
    if (typeof line === 'string') parseLine(line);
    if (!this.queues.has(marker)) this.queues.set(marker, []);
    this.queues.get(marker)!.push(line);
  }

  remaining(): Record<string, number> {
    return Object.fromEntries([...this.queues].map(([k, v]) => [k, v.length]));
  }

  /** Chooses the reply of a model request and records it on the request. */
  answer(req: ModelRequest): Action {
    const key = this.conversationOf(req);
    req.conversation = key;
    const line = this.queues.get(key)!.shift();
    if (line !== undefined) {
      req.reply = parseLine(typeof line === 'function' ? line(req) : line);
    } else {
      req.fallback = true;
      const last = req.toolResults.at(-1);
      req.reply =
        req.endsWithToolResult && last
          ? { kind: 'say', text: `tool said: ${last.text.slice(0, 300)}` }
          : { kind: 'say', text: `echo: ${lastPrompt(req).slice(0, 300)}` };
    }
    return req.reply;
  }
}

/** The last user text that is not a client-injected `<system-reminder>` block. */
export function lastPrompt(req: ModelRequest): string {
  return [...req.userTexts].reverse().find((t) => !t.trimStart().startsWith('<system-reminder>')) ?? '';
}

/** Text of the common content shapes: a string, or an array of `{text}` / `{type:'text', text}` parts. */
export function textOf(c: unknown): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c))
    return c.map((p) => (typeof p === 'string' ? p : typeof p?.text === 'string' ? p.text : '')).join('');
  return '';
}

export interface Handler {
  /** Fills the normalized fields of a request to the model endpoint (`req.isModelCall` is already true). */
  parse(req: ModelRequest): void;
  /** Is this path the model endpoint? */
  isModelPath(path: string): boolean;
  /** Writes the reply to a model request. */
  reply(req: ModelRequest, action: Action, res: http.ServerResponse, seq: number): void;
  /** Answers a non-model request (default 404). */
  other?(req: ModelRequest, res: http.ServerResponse): void;
  /** Text for auxiliary requests. */
  auxText: string;
}

export async function startFake(api: Api, script: Script | undefined, h: Handler): Promise<FakeServer> {
  const book = new ScriptBook(script);
  const requests: ModelRequest[] = [];
  let seq = 0;
  const server = http.createServer((hreq, res) => {
    const chunks: Buffer[] = [];
    hreq.on('data', (d: Buffer) => chunks.push(d));
    hreq.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any = {};
      try {
        body = raw ? JSON.parse(raw) : {};
      } catch {
        body = { _raw: raw };
      }
      const path = (hreq.url ?? '/').split('?')[0];
      const req: ModelRequest = {
        api,
        method: hreq.method ?? 'GET',
        url: hreq.url ?? '/',
        headers: hreq.headers,
        body,
        at: Date.now(),
        isModelCall: hreq.method === 'POST' && h.isModelPath(path),
        system: '',
        userTexts: [],
        toolResults: [],
        endsWithToolResult: false,
        tools: [],
        aux: false,
      };
      requests.push(req);
      try {
        if (!req.isModelCall) {
          if (h.other) return h.other(req, res);
          res.writeHead(404, { 'content-type': 'application/json' });
          return res.end(JSON.stringify({ error: { message: `fake ${api}: no route ${req.method} ${path}` } }));
        }
        h.parse(req);
        const action: Action = req.aux ? { kind: 'say', text: h.auxText } : book.answer(req);
        if (req.aux) req.reply = action;
        const n = ++seq;
        const send = () => {
          if (res.destroyed) return; // the client gave up while the fake was "thinking"
          try {
            h.reply(req, action, res, n);
            req.repliedAt = Date.now();
          } catch (e) {
            if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ error: { message: `fake ${api}: ${String(e)}` } }));
          }
        };
        if (action.delayMs) setTimeout(send, action.delayMs);
        else send();
      } catch (e) {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `fake ${api}: ${String(e)}` } }));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    modelRequests: () => requests.filter((r) => r.isModelCall),
    turns: () => requests.filter((r) => r.isModelCall && !r.aux),
    push: (line, marker) => book.push(line, marker),
    remaining: () => book.remaining(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function sse(res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
}

export function json(res: http.ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}
