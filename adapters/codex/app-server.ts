// A client of Codex's shared background server (the app-server daemon the TUI runs its turns on):
// JSON-RPC messages, one per WebSocket text frame, over the control socket
// `$CODEX_HOME/app-server-control/app-server-control.sock`. Only what the wake needs: initialize,
// then requests and their answers; notifications are ignored. Node 20 has no WebSocket client
// that speaks over a Unix socket, so the RFC 6455 client side is here (text frames, masked as a
// client must; ping answered; close ends the connection).
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';

/** How long the socket handshake and one request may take: the daemon answers a queue request
 *  in milliseconds; a daemon that does not answer within this is stuck or gone. */
const REQUEST_TIMEOUT_MS = 5000;

/** Frame payloads up to 125 bytes carry their length in the header byte itself; up to 65535 in
 *  the next 2 bytes; beyond that in the next 8 (RFC 6455 §5.2). */
const SHORT_LEN = 125;
const MEDIUM_LEN = 0xffff;

const OP_TEXT = 0x1,
  OP_CLOSE = 0x8,
  OP_PING = 0x9,
  OP_PONG = 0xa;

export const controlSocket = (codexHome: string) => join(codexHome, 'app-server-control', 'app-server-control.sock');

function frame(op: number, payload: Buffer): Buffer {
  const len = payload.length;
  const head =
    len <= SHORT_LEN
      ? Buffer.from([0x80 | op, 0x80 | len])
      : len <= MEDIUM_LEN
        ? Buffer.from([0x80 | op, 0x80 | 126, len >> 8, len & 0xff])
        : Buffer.concat([Buffer.from([0x80 | op, 0x80 | 127]), u64(len)]);
  const mask = randomBytes(4);
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i]! ^= mask[i % 4]!;
  return Buffer.concat([head, mask, body]);
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/** Whole frames at the front of `buf`: [opcode, fin, payload] each, and the bytes left over. */
function parseFrames(buf: Buffer): { frames: Array<[number, boolean, Buffer]>; rest: Buffer } {
  const frames: Array<[number, boolean, Buffer]> = [];
  let at = 0;
  for (;;) {
    if (buf.length - at < 2) break;
    const b0 = buf[at]!,
      b1 = buf[at + 1]!;
    let len = b1 & 0x7f,
      off = at + 2;
    if (len === 126) {
      if (buf.length - off < 2) break;
      len = buf.readUInt16BE(off);
      off += 2;
    } else if (len === 127) {
      if (buf.length - off < 8) break;
      len = Number(buf.readBigUInt64BE(off));
      off += 8;
    }
    const masked = (b1 & 0x80) !== 0;
    const mask = masked ? buf.subarray(off, off + 4) : null;
    if (masked) off += 4;
    if (buf.length - off < len) break;
    const payload = Buffer.from(buf.subarray(off, off + len));
    if (mask) for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i % 4]!;
    frames.push([b0 & 0x0f, (b0 & 0x80) !== 0, payload]);
    at = off + len;
  }
  return { frames, rest: buf.subarray(at) };
}

export interface AppServer {
  request<T = unknown>(method: string, params: unknown): Promise<T>;
  close(): void;
}

function upgrade(socketPath: string): Promise<{ socket: Duplex; head: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      socketPath,
      path: '/',
      timeout: REQUEST_TIMEOUT_MS,
      headers: {
        Host: 'localhost',
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
      },
    });
    req.on('upgrade', (_res, socket, head) => resolve({ socket, head }));
    req.on('response', (res) =>
      reject(new Error(`the Codex background server refused the connection (HTTP ${res.statusCode})`)),
    );
    req.on('timeout', () => req.destroy(new Error('the Codex background server did not answer')));
    req.on('error', reject);
    req.end();
  });
}

/** Connects and initializes; rejects when no daemon listens (Codex in embedded mode, or not yet started). */
export async function connectAppServer(
  socketPath: string,
  client: { name: string; version: string },
): Promise<AppServer> {
  const { socket, head } = await upgrade(socketPath);
  let buf: Buffer = Buffer.from(head);
  let parts: Buffer[] = [];
  let next = 1;
  let closed = false;
  const waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  const fail = (e: Error) => {
    closed = true;
    for (const w of waiting.values()) {
      clearTimeout(w.timer);
      w.reject(e);
    }
    waiting.clear();
  };
  const onMessage = (text: string) => {
    let msg: { id?: number; result?: unknown; error?: { message?: string } };
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    const w = typeof msg.id === 'number' ? waiting.get(msg.id) : undefined;
    if (!w || !('result' in msg || 'error' in msg)) return; // a notification or a server request
    waiting.delete(msg.id!);
    clearTimeout(w.timer);
    if (msg.error) w.reject(new Error(msg.error.message ?? JSON.stringify(msg.error)));
    else w.resolve(msg.result);
  };
  socket.on('data', (d: Buffer) => {
    const { frames, rest } = parseFrames(Buffer.concat([buf, d]));
    buf = rest;
    for (const [op, fin, payload] of frames) {
      if (op === OP_PING) socket.write(frame(OP_PONG, payload));
      else if (op === OP_CLOSE) socket.end();
      else if (op === OP_TEXT || op === 0) {
        parts.push(payload);
        if (fin) {
          onMessage(Buffer.concat(parts).toString('utf8'));
          parts = [];
        }
      }
    }
  });
  socket.on('close', () => fail(new Error('the Codex background server closed the connection')));
  socket.on('error', (e) => fail(e));
  const server: AppServer = {
    request<T>(method: string, params: unknown) {
      if (closed) return Promise.reject(new Error('the Codex background server connection is closed'));
      const id = next++;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error(`the Codex background server did not answer ${method}`));
        }, REQUEST_TIMEOUT_MS);
        waiting.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
        socket.write(frame(OP_TEXT, Buffer.from(JSON.stringify({ id, method, params }))));
      });
    },
    close() {
      if (closed) return;
      closed = true;
      socket.end(frame(OP_CLOSE, Buffer.alloc(0)));
      socket.destroy();
    },
  };
  await server.request('initialize', {
    clientInfo: { name: client.name, title: null, version: client.version },
    capabilities: { experimentalApi: true, requestAttestation: false },
  });
  socket.write(frame(OP_TEXT, Buffer.from(JSON.stringify({ method: 'initialized' }))));
  return server;
}
