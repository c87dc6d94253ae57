// The pure half of the MCP stdio transport (protocol.md "Rules and defaults", "MCP server and wire"): bytes in,
// frames out, no streams. As the MCP SDK keeps `shared/stdio.ts` (its ReadBuffer) apart from
// `server/stdio.ts`, this module holds every framing rule and `transport.ts` only moves bytes.
//
// Contract:
// - one JSON-RPC message per line; a trailing "\r" is stripped (and not counted); blank lines are ignored;
// - a line over `maxLineBytes` UTF-8 bytes (counted across chunks) becomes a -32700 error frame, its
//   bytes up to the next newline are discarded, and at most `maxLineBytes` bytes are ever buffered;
// - malformed JSON → -32700 id:null; JSON that is not a JSON-RPC message (SDK schema) → -32600;
// - at the end of input, an unfinished last line is framed as if a newline followed it (`end`).
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

/** What one line became: a message for the server, or an error frame to answer with (and a line
 *  for the diagnostics log). */
export type Framed =
  | { kind: 'message'; message: JSONRPCMessage }
  | { kind: 'error'; frame: ProtocolErrorFrame; log: string };

const CR = Buffer.from([0x0d]);

export class LineFramer {
  readonly maxLineBytes: number;
  private parts: Buffer[] = [];
  private buffered = 0; // bytes held in `parts`
  private lineBytes = 0; // bytes of the line so far, including discarded ones
  private discarding = false;
  private head: Buffer = Buffer.alloc(0); // first bytes of a discarded line
  private tail: Buffer = Buffer.alloc(0); // last bytes of a discarded line
  private pendingCR = false; // the previous chunk ended with "\r": newline or content?
  private peak = 0;

  constructor(maxLineBytes: number = MCP_MAX_FRAME_BYTES) {
    if (!Number.isInteger(maxLineBytes) || maxLineBytes < 1 || maxLineBytes > MCP_MAX_BUFFER_BYTES) {
      throw new RangeError(`maxLineBytes must be an integer in 1..${MCP_MAX_BUFFER_BYTES}, got ${maxLineBytes}`);
    }
    this.maxLineBytes = maxLineBytes;
  }

  /** Bytes of the current, unfinished line held in memory (never over maxLineBytes). */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Largest `bufferedBytes` seen since construction. */
  get peakBufferedBytes(): number {
    return this.peak;
  }

  /** Bytes of an unfinished line (0 when the input ended on a newline). */
  get pendingBytes(): number {
    return this.lineBytes + (this.pendingCR ? 1 : 0);
  }

  /** Takes one chunk; returns every line it completed, framed. */
  push(chunk: Buffer): Framed[] {
    const out: Framed[] = [];
    let start = 0;
    while (start < chunk.length) {
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
      if (nl === -1) break;
      const f = this.finishLine();
      if (f) out.push(f);
      start = nl + 1;
    }
    return out;
  }

  /** The input ended: an unfinished last line (no newline after it) is framed as if one came. */
  end(): Framed[] {
    if (this.pendingBytes === 0) return [];
    this.pendingCR = false; // a "\r" at the very end is the line's end, as before a newline
    const f = this.finishLine();
    return f ? [f] : [];
  }

  /** Forgets an unfinished line (the input ended). */
  reset(): void {
    this.parts = [];
    this.buffered = 0;
    this.lineBytes = 0;
    this.discarding = false;
    this.head = Buffer.alloc(0);
    this.tail = Buffer.alloc(0);
    this.pendingCR = false;
  }

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

  private finishLine(): Framed | null {
    const pendingCR = this.pendingCR;
    if (this.discarding) {
      const id = sniffRequestId(this.head.toString('utf8'), this.tail.toString('utf8'));
      const bytes = this.lineBytes;
      this.reset();
      this.pendingCR = pendingCR;
      return {
        kind: 'error',
        frame: protocolErrorFor(PARSE_ERROR, `Parse error: message exceeds ${this.maxLineBytes} bytes`, id),
        log: `mcp transport: discarded a line of ${bytes} bytes (limit ${this.maxLineBytes}), id ${JSON.stringify(id)}`,
      };
    }
    const parts = this.parts;
    this.reset();
    this.pendingCR = pendingCR;
    const line = parts.length === 1 ? parts[0]!.toString('utf8') : Buffer.concat(parts).toString('utf8');
    return frameLine(line);
  }
}

/** One complete line, framed. */
export function frameLine(line: string): Framed | null {
  if (line.trim() === '') return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    return {
      kind: 'error',
      frame: protocolErrorFor(PARSE_ERROR, 'Parse error'),
      log: `mcp transport: malformed JSON (${(err as Error).message.slice(0, 200)})`,
    };
  }
  const parsed = JSONRPCMessageSchema.safeParse(value);
  if (!parsed.success)
    return {
      kind: 'error',
      frame: protocolErrorFor(INVALID_REQUEST, 'Invalid Request', idOfParsed(value)),
      log: `mcp transport: not a JSON-RPC message (${parsed.error.message.slice(0, 200)})`,
    };
  return { kind: 'message', message: parsed.data };
}
