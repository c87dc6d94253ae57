// Newline-delimited JSON-RPC over stdio with a byte-exact line limit (FEATURES.md §4 "MCP frame",
// §7.3 wire table; stack notes §6). The SDK's StdioServerTransport cannot be used: it closes itself
// when its buffer overflows and answers malformed lines with nothing, so a client waits 60 s.
//
// Contract:
// - one JSON-RPC message per line; a trailing "\r" is stripped (and not counted); blank lines are ignored;
// - a line over `maxLineBytes` UTF-8 bytes (counted across chunks) is answered with -32700, its bytes up
//   to the next newline are discarded, and at most `maxLineBytes` bytes are ever buffered;
// - malformed JSON → -32700 id:null; JSON that is not a JSON-RPC message (SDK schema) → -32600;
// - nothing but JSON-RPC is ever written to `output`; diagnostics go to `onLog`.
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { MCP_MAX_BUFFER_BYTES, MCP_MAX_FRAME_BYTES } from '../../src/protocol/limits.ts';

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;

export interface LineLimitedStdioTransportOptions {
  /** Longest accepted line in UTF-8 bytes, excluding the newline and a trailing "\r". */
  maxLineBytes?: number;
  /** Diagnostics sink (stderr in production); never the JSON-RPC output. */
  onLog?: (msg: string) => void;
}

/** An error frame as written on the wire. `id: null` is valid JSON-RPC 2.0, though the SDK's
 *  JSONRPCMessageSchema rejects it (an SDK client drops such a frame): prefer a recovered id. */
export interface ProtocolErrorFrame {
  jsonrpc: '2.0';
  id: RequestId | null;
  error: { code: number; message: string };
}

export function protocolErrorFor(code: number, message: string, id: RequestId | null = null): ProtocolErrorFrame {
  return { jsonrpc: '2.0', id, error: { code, message } };
}

const SNIFF_BYTES = 512;
const ID = String.raw`(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|"(?:[^"\\]|\\.)*")`;
// Only top-level positions are trusted: the first key(s) of the object, or its very last key.
const HEAD_ID = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID}\s*[,}]`);
const TAIL_ID = new RegExp(String.raw`,\s*"id"\s*:\s*${ID}\s*\}\s*$`);
// A response (the peer answering one of OUR requests) must never be answered with its id: the peer
// would take the error as the answer to its own request with that id.
const HEAD_RESPONSE = new RegExp(
  String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?(?:"id"\s*:\s*${ID}\s*,\s*)?"(?:result|error)"\s*:`,
);

/** The request id of a (possibly truncated) line, from its first and last bytes; null when the id is
 *  not at a top-level position or the line looks like a response. */
export function sniffRequestId(head: string, tail: string): RequestId | null {
  if (HEAD_RESPONSE.test(head)) return null;
  const m = HEAD_ID.exec(head) ?? TAIL_ID.exec(tail);
  if (!m) return null;
  try {
    const id: unknown = JSON.parse(m[1]!);
    return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
  } catch {
    return null;
  }
}

/** The id to answer an invalid (but parsable) message with. */
function idOfParsed(value: unknown): RequestId | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const o = value as Record<string, unknown>;
  if (!('method' in o) && ('result' in o || 'error' in o)) return null;
  const id = o.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

function firstBytes(parts: Buffer[], n: number): Buffer {
  const out: Buffer[] = [];
  let left = n;
  for (const p of parts) {
    if (left <= 0) break;
    const take = p.subarray(0, left);
    out.push(take);
    left -= take.length;
  }
  return Buffer.concat(out);
}

function lastBytes(parts: Buffer[], n: number): Buffer {
  const out: Buffer[] = [];
  let left = n;
  for (let i = parts.length - 1; i >= 0 && left > 0; i--) {
    const p = parts[i]!;
    const take = p.subarray(Math.max(0, p.length - left));
    out.unshift(take);
    left -= take.length;
  }
  return Buffer.concat(out);
}

const CR = Buffer.from([0x0d]);

export class LineLimitedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  readonly maxLineBytes: number;
  private readonly onLog: (msg: string) => void;

  private started = false;
  private closed = false;

  // Current line.
  private parts: Buffer[] = [];
  private buffered = 0; // bytes held in `parts`
  private lineBytes = 0; // bytes of the line so far, including discarded ones
  private discarding = false;
  private head: Buffer = Buffer.alloc(0); // first bytes of a discarded line
  private tail: Buffer = Buffer.alloc(0); // last bytes of a discarded line
  private pendingCR = false; // the previous chunk ended with "\r": newline or content?
  private peak = 0;

  private drainWaiters: Array<(err?: Error) => void> = [];

  constructor(
    private readonly input: Readable = process.stdin,
    private readonly output: Writable = process.stdout,
    opts: LineLimitedStdioTransportOptions = {},
  ) {
    const max = opts.maxLineBytes ?? MCP_MAX_FRAME_BYTES;
    if (!Number.isInteger(max) || max < 1 || max > MCP_MAX_BUFFER_BYTES) {
      throw new RangeError(`maxLineBytes must be an integer in 1..${MCP_MAX_BUFFER_BYTES}, got ${max}`);
    }
    this.maxLineBytes = max;
    this.onLog = opts.onLog ?? (() => {});
  }

  /** Bytes of the current, unfinished line held in memory (never over maxLineBytes). */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Largest `bufferedBytes` seen since construction. */
  get peakBufferedBytes(): number {
    return this.peak;
  }

  async start(): Promise<void> {
    if (this.started) throw new Error('LineLimitedStdioTransport already started');
    this.started = true;
    this.input.on('data', this.onData);
    this.input.on('end', this.onEnd);
    this.input.on('close', this.onEnd);
    this.input.on('error', this.onInputError);
    this.output.on('drain', this.onDrain);
    this.output.on('error', this.onOutputError);
    this.output.on('close', this.onOutputClose);
    if (this.input.readableEnded) queueMicrotask(this.onEnd);
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new Error('Transport closed'));
    let text: string;
    try {
      text = JSON.stringify(message) + '\n';
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    return this.writeLine(text);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.input.off('data', this.onData);
    this.input.off('end', this.onEnd);
    this.input.off('close', this.onEnd);
    this.input.off('error', this.onInputError);
    this.output.off('drain', this.onDrain);
    this.output.off('error', this.onOutputError);
    this.output.off('close', this.onOutputClose);
    // Like the SDK: stop reading only if nobody else listens, so the process can exit.
    if (this.input.listenerCount('data') === 0) this.input.pause();
    if (this.lineBytes > 0 || this.pendingCR) this.onLog(`mcp transport: closed with an unterminated line of ${this.lineBytes} bytes (dropped)`);
    this.resetLine();
    // Data already handed to the output stream will still be flushed by it.
    this.settleWaiters();
    this.onclose?.();
  }

  // ---- input -------------------------------------------------------------------------------------

  private onData = (data: Buffer | string): void => {
    const chunk = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let start = 0;
    while (start < chunk.length && !this.closed) {
      const nl = chunk.indexOf(0x0a, start);
      let end = nl === -1 ? chunk.length : nl;
      if (this.pendingCR) {
        this.pendingCR = false;
        if (nl !== start) this.append(CR, 0, 1, false); // "\r" not followed by "\n" is content
      }
      if (end > start && chunk[end - 1] === 0x0d) {
        end--; // strip before counting; if the chunk ends here, decide on the next chunk
        if (nl === -1) this.pendingCR = true;
      }
      this.append(chunk, start, end, nl === -1);
      if (nl === -1) return;
      this.finishLine();
      start = nl + 1;
    }
  };

  private append(chunk: Buffer, start: number, end: number, keep: boolean): void {
    const n = end - start;
    if (n === 0) return;
    const seg = chunk.subarray(start, end);
    this.lineBytes += n;
    if (this.discarding) {
      this.tail = lastBytes([this.tail, seg], SNIFF_BYTES);
      return;
    }
    if (this.lineBytes > this.maxLineBytes) {
      // Stop buffering now; keep only what id recovery needs.
      const all = [...this.parts, seg];
      this.head = firstBytes(all, SNIFF_BYTES);
      this.tail = lastBytes(all, SNIFF_BYTES);
      this.discarding = true;
      this.parts = [];
      this.buffered = 0;
      return;
    }
    // A partial line is copied so it does not pin the whole (possibly large) chunk in memory.
    this.parts.push(keep ? Buffer.from(seg) : seg);
    this.buffered += n;
    if (this.buffered > this.peak) this.peak = this.buffered;
  }

  private finishLine(): void {
    if (this.discarding) {
      const id = sniffRequestId(this.head.toString('utf8'), this.tail.toString('utf8'));
      const bytes = this.lineBytes;
      this.resetLine();
      this.onLog(`mcp transport: discarded a line of ${bytes} bytes (limit ${this.maxLineBytes}), id ${JSON.stringify(id)}`);
      this.writeError(protocolErrorFor(PARSE_ERROR, `Parse error: message exceeds ${this.maxLineBytes} bytes`, id));
      return;
    }
    const parts = this.parts;
    this.resetLine();
    const line = parts.length === 1 ? parts[0]!.toString('utf8') : Buffer.concat(parts).toString('utf8');
    this.deliver(line);
  }

  private resetLine(): void {
    this.parts = [];
    this.buffered = 0;
    this.lineBytes = 0;
    this.discarding = false;
    this.head = Buffer.alloc(0);
    this.tail = Buffer.alloc(0);
  }

  private deliver(line: string): void {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      this.onLog(`mcp transport: malformed JSON (${(err as Error).message.slice(0, 200)})`);
      this.writeError(protocolErrorFor(PARSE_ERROR, 'Parse error'));
      return;
    }
    const parsed = JSONRPCMessageSchema.safeParse(value);
    if (!parsed.success) {
      this.onLog(`mcp transport: not a JSON-RPC message (${parsed.error.message.slice(0, 200)})`);
      this.writeError(protocolErrorFor(INVALID_REQUEST, 'Invalid Request', idOfParsed(value)));
      return;
    }
    try {
      this.onmessage?.(parsed.data);
    } catch (err) {
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private onEnd = (): void => {
    void this.close();
  };

  private onInputError = (err: Error): void => {
    this.onerror?.(err);
  };

  // ---- output ------------------------------------------------------------------------------------

  private writeError(frame: ProtocolErrorFrame): void {
    this.writeLine(JSON.stringify(frame) + '\n').catch((err: unknown) => {
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
    });
  }

  /** Resolves once the stream accepted the line without backpressure, or after the next 'drain'. */
  private writeLine(text: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const done = (err?: Error): void => {
        if (settled) return;
        settled = true;
        if (err) reject(err);
        else resolve();
      };
      let ok: boolean;
      try {
        ok = this.output.write(text, (err) => {
          if (err) done(err);
        });
      } catch (err) {
        done(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      if (ok) done();
      else this.drainWaiters.push(done);
    });
  }

  private settleWaiters(err?: Error): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w(err);
  }

  private onDrain = (): void => {
    this.settleWaiters();
  };

  private onOutputError = (err: Error): void => {
    this.settleWaiters(err);
    this.onerror?.(err);
  };

  private onOutputClose = (): void => {
    this.settleWaiters(new Error('Output stream closed'));
  };
}
