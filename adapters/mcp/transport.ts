// The thin half of the MCP stdio transport: moves bytes between streams and the pure LineFramer
// (line-framer.ts, where every framing rule lives). The SDK's StdioServerTransport cannot be
// used: it closes itself when its buffer overflows and answers malformed lines with nothing, so a
// client waits 60 s. Nothing but JSON-RPC is ever written to `output`; diagnostics go to `onLog`.
// When the input ends, every request already read is still answered before the transport closes
// (`echo <request> | opencomms mcp` gets its answer), for at most END_GRACE_MS.
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { type Framed, LineFramer, type ProtocolErrorFrame } from './line-framer.ts';

export { INVALID_REQUEST, PARSE_ERROR, protocolErrorFor, sniffRequestId } from './line-framer.ts';

/** After the input ended, how long requests already read may take to be answered before the
 *  transport closes without them (a handler that never answers must not keep the server forever). */
export const END_GRACE_MS = 60_000;

const isRequest = (m: JSONRPCMessage): m is JSONRPCMessage & { id: RequestId; method: string } =>
  'method' in m && 'id' in m;
const isResponse = (m: JSONRPCMessage): m is JSONRPCMessage & { id: RequestId } =>
  !('method' in m) && 'id' in m && ('result' in m || 'error' in m);

export interface LineLimitedStdioTransportOptions {
  /** Longest accepted line in UTF-8 bytes, excluding the newline and a trailing "\r". */
  maxLineBytes?: number;
  /** Diagnostics sink (stderr in production); never the JSON-RPC output. */
  onLog?: (msg: string) => void;
}

export class LineLimitedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  private readonly framer: LineFramer;
  private readonly onLog: (msg: string) => void;
  private started = false;
  private closed = false;
  private drainWaiters: Array<(err?: Error) => void> = [];
  /** Requests handed to `onmessage` and not answered yet. */
  private readonly unanswered = new Set<RequestId>();
  private ended = false;
  private late?: NodeJS.Timeout;

  constructor(
    private readonly input: Readable = process.stdin,
    private readonly output: Writable = process.stdout,
    opts: LineLimitedStdioTransportOptions = {},
  ) {
    this.framer = new LineFramer(opts.maxLineBytes);
    this.onLog = opts.onLog ?? (() => {});
  }

  get maxLineBytes(): number {
    return this.framer.maxLineBytes;
  }

  /** Bytes of the current, unfinished line held in memory (never over maxLineBytes). */
  get bufferedBytes(): number {
    return this.framer.bufferedBytes;
  }

  /** Largest `bufferedBytes` seen since construction. */
  get peakBufferedBytes(): number {
    return this.framer.peakBufferedBytes;
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
      text = `${JSON.stringify(message)}\n`;
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    const answered = isResponse(message) && this.unanswered.delete(message.id);
    const written = this.writeLine(text);
    if (answered && this.ended && this.unanswered.size === 0) {
      const close = () => void this.close();
      written.then(close, close);
    }
    return written;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.late);
    this.input.off('data', this.onData);
    this.input.off('end', this.onEnd);
    this.input.off('close', this.onEnd);
    this.input.off('error', this.onInputError);
    this.output.off('drain', this.onDrain);
    this.output.off('error', this.onOutputError);
    this.output.off('close', this.onOutputClose);
    // Like the SDK: stop reading only if nobody else listens, so the process can exit.
    if (this.input.listenerCount('data') === 0) this.input.pause();
    const pending = this.framer.pendingBytes;
    if (pending > 0) this.onLog(`mcp transport: closed with an unterminated line of ${pending} bytes (dropped)`);
    this.framer.reset();
    // Data already handed to the output stream will still be flushed by it.
    this.settleWaiters();
    this.onclose?.();
  }

  private onData = (data: Buffer | string): void => {
    if (this.closed) return;
    this.handle(this.framer.push(typeof data === 'string' ? Buffer.from(data, 'utf8') : data));
  };

  private handle(frames: Framed[]): void {
    for (const f of frames) {
      if (f.kind === 'error') {
        this.onLog(f.log);
        this.writeError(f.frame);
        continue;
      }
      if (isRequest(f.message)) this.unanswered.add(f.message.id);
      try {
        this.onmessage?.(f.message);
      } catch (err) {
        this.onerror?.(err instanceof Error ? err : new Error(String(err)));
      }
      if (this.closed) return;
    }
  }

  /** The input ended: nothing more comes, but what was read is answered first. */
  private onEnd = (): void => {
    if (this.ended || this.closed) return;
    this.ended = true;
    this.input.off('data', this.onData);
    this.handle(this.framer.end());
    if (this.closed) return;
    if (this.unanswered.size === 0) {
      void this.close();
      return;
    }
    this.late = setTimeout(() => {
      this.onLog(`mcp transport: input ended; ${this.unanswered.size} request(s) unanswered after ${END_GRACE_MS} ms`);
      void this.close();
    }, END_GRACE_MS);
    this.late.unref();
  };

  private onInputError = (err: Error): void => {
    this.onerror?.(err);
  };

  private writeError(frame: ProtocolErrorFrame): void {
    this.writeLine(`${JSON.stringify(frame)}\n`).catch((err: unknown) => {
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
