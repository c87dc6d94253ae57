import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { LineLimitedStdioTransport, sniffRequestId } from '../../../adapters/mcp/transport.ts';
import { MCP_MAX_BUFFER_BYTES, MCP_MAX_FRAME_BYTES } from '../../../src/protocol/limits.ts';

const MAX = MCP_MAX_FRAME_BYTES;
const OVERSIZE = `Parse error: message exceeds ${MAX} bytes`;

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

async function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const until = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > until) throw new Error('waitFor timed out');
    await tick();
  }
}

/** Writes `data` in chunks of `size` bytes, honouring backpressure. */
async function writeChunks(stream: PassThrough, data: Buffer, size: number): Promise<void> {
  for (let i = 0; i < data.length; i += size) {
    if (!stream.write(data.subarray(i, i + size))) await new Promise((r) => stream.once('drain', r));
  }
}

function setup(opts: { maxLineBytes?: number } = {}) {
  const input = new PassThrough();
  const output = new PassThrough();
  const logs: string[] = [];
  const t = new LineLimitedStdioTransport(input, output, { ...opts, onLog: (m) => logs.push(m) });
  const messages: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  let closes = 0;
  t.onmessage = (m) => void messages.push(m);
  t.onerror = (e) => void errors.push(e);
  t.onclose = () => void closes++;
  const out: unknown[] = [];
  let rest = '';
  output.on('data', (c: Buffer) => {
    rest += c.toString('utf8');
    const lines = rest.split('\n');
    rest = lines.pop()!;
    for (const l of lines) out.push(JSON.parse(l)); // throws if anything but JSON is written
  });
  return { input, output, t, logs, messages, errors, out, closes: () => closes };
}

/** A request line of exactly `bytes` UTF-8 bytes whose padding is made of `ch` where possible. */
function requestOfBytes(bytes: number, ch: string, id: number): { line: Buffer; pad: string } {
  const pre = `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"text":"`;
  const post = `"}}}`;
  const room = bytes - Buffer.byteLength(pre + post);
  const k = Buffer.byteLength(ch);
  const pad = 'a'.repeat(room % k) + ch.repeat(Math.floor(room / k));
  const line = Buffer.from(pre + pad + post, 'utf8');
  expect(line.length).toBe(bytes);
  return { line, pad };
}

const req = (id: number, method = 'ping'): string => JSON.stringify({ jsonrpc: '2.0', id, method });

describe('LineLimitedStdioTransport', () => {
  it('answers a 1.5 MiB line in 7 KB chunks with -32700 and the recovered id, then serves the next request', async () => {
    const s = setup();
    await s.t.start();
    // SDK Client key order: id comes LAST.
    const big = Buffer.from(
      `${JSON.stringify({ method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(1.5 * 1024 * 1024) } }, jsonrpc: '2.0', id: 4 })}\n`,
    );
    await writeChunks(s.input, Buffer.concat([big, Buffer.from(`${req(5)}\n`)]), 7 * 1024);
    await waitFor(() => s.out.length >= 1 && s.messages.length >= 1);
    expect(s.out).toEqual([{ jsonrpc: '2.0', id: 4, error: { code: -32700, message: OVERSIZE } }]);
    expect(s.messages).toEqual([{ jsonrpc: '2.0', id: 5, method: 'ping' }]);
    expect(s.t.peakBufferedBytes).toBeLessThanOrEqual(MAX);
    expect(s.t.bufferedBytes).toBe(0);
    expect(s.logs.some((l) => l.includes('discarded'))).toBe(true);
  });

  it('recovers an id written first, and falls back to null when the id is not top-level', async () => {
    const s = setup({ maxLineBytes: 100 });
    await s.t.start();
    const pad = 'y'.repeat(200);
    s.input.write(`{"jsonrpc":"2.0","id":"abc","method":"m","params":{"p":"${pad}"}}\n`);
    s.input.write(`{"method":"m","params":{"p":"${pad}","id":9}}\n`); // nested id at the end
    s.input.write(`{"jsonrpc":"2.0","method":"m","params":{"id":7,"p":"${pad}"}}\n`); // nested id in front
    s.input.write(`{"result":{"p":"${pad}"},"jsonrpc":"2.0","id":3}\n`); // a response: never answered with its id
    await waitFor(() => s.out.length >= 4);
    expect(s.out.map((o) => (o as { id: unknown }).id)).toEqual(['abc', null, null, null]);
  });

  it('sniffRequestId trusts only top-level positions', () => {
    expect(sniffRequestId('{"jsonrpc":"2.0","id":12,"method":"x"', '')).toBe(12);
    expect(sniffRequestId('{"id":"q\\"r","method":"x"', '')).toBe('q"r');
    expect(sniffRequestId('{"method":"x","params":{', ',"jsonrpc":"2.0","id":8}')).toBe(8);
    expect(sniffRequestId('{"method":"x","params":{', ',"id":8}}')).toBeNull();
    expect(sniffRequestId('{"jsonrpc":"2.0","id":1234', '')).toBeNull(); // cut inside the id
    expect(sniffRequestId('{"jsonrpc":"2.0","id":1,"result":{', '')).toBeNull();
  });

  for (const [label, ch] of [
    ['1-byte', 'a'],
    ['3-byte', '€'],
    ['4-byte', '😀'],
  ] as const) {
    it(`MCP-7: accepts exactly ${MAX} bytes and refuses ${MAX + 1} with ${label} characters, split across chunks`, async () => {
      const s = setup();
      await s.t.start();
      const ok = requestOfBytes(MAX, ch, 1);
      const over = requestOfBytes(MAX + 1, ch, 2);
      const nl = Buffer.from('\n');
      const stream = Buffer.concat([ok.line, nl, over.line, nl, Buffer.from(`${req(3)}\n`)]);
      // 7001 is coprime with 3 and 4: chunk borders fall inside multi-byte characters.
      let splitInside = false;
      for (let i = 7001; i < ok.line.length; i += 7001) if ((ok.line[i]! & 0xc0) === 0x80) splitInside = true;
      expect(splitInside).toBe(ch !== 'a');
      await writeChunks(s.input, stream, 7001);
      await waitFor(() => s.messages.length >= 2 && s.out.length >= 1);
      const first = s.messages[0] as unknown as { id: number; params: { arguments: { text: string } } };
      expect(first.id).toBe(1);
      expect(first.params.arguments.text).toBe(ok.pad); // decoded intact across split characters
      expect(s.out).toEqual([{ jsonrpc: '2.0', id: 2, error: { code: -32700, message: OVERSIZE } }]);
      expect((s.messages[1] as { id: number }).id).toBe(3);
      expect(s.t.peakBufferedBytes).toBe(MAX);
    });
  }

  it('does not count a trailing \\r, even when it ends a chunk', async () => {
    const s = setup({ maxLineBytes: 128 });
    await s.t.start();
    const line = requestOfBytes(128, 'a', 1).line;
    s.input.write(Buffer.concat([line, Buffer.from('\r')]));
    s.input.write('\n');
    s.input.write(Buffer.concat([line.subarray(0, 127), Buffer.from('\r')])); // "\r" then content → 129 bytes
    s.input.write('x\n');
    s.input.write(`\r\n\n   \n${req(2)}\r\n`);
    await waitFor(() => s.messages.length >= 2 && s.out.length >= 1);
    expect(s.messages.map((m) => (m as { id: number }).id)).toEqual([1, 2]);
    expect((s.out[0] as { error: { code: number } }).error.code).toBe(-32700);
    expect(s.out).toHaveLength(1); // blank lines are ignored
  });

  it('answers malformed JSON with -32700 id:null and keeps serving', async () => {
    const s = setup();
    await s.t.start();
    s.input.write(`{"jsonrpc":"2.0","id":1,"method":\n${req(2)}\n`);
    await waitFor(() => s.out.length >= 1 && s.messages.length >= 1);
    expect(s.out).toEqual([{ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }]);
    expect(s.messages).toEqual([{ jsonrpc: '2.0', id: 2, method: 'ping' }]);
  });

  it('answers valid JSON that is not JSON-RPC with -32600, with the id when there is one', async () => {
    const s = setup();
    await s.t.start();
    s.input.write('{"jsonrpc":"1.0","id":7,"method":"ping"}\n');
    s.input.write('{"jsonrpc":"2.0","id":8}\n');
    s.input.write('[1,2]\n');
    s.input.write('42\n');
    s.input.write(`${req(9)}\n`);
    await waitFor(() => s.out.length >= 4 && s.messages.length >= 1);
    expect(s.out).toEqual([
      { jsonrpc: '2.0', id: 7, error: { code: -32600, message: 'Invalid Request' } },
      { jsonrpc: '2.0', id: 8, error: { code: -32600, message: 'Invalid Request' } },
      { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } },
      { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } },
    ]);
    expect(s.messages).toEqual([{ jsonrpc: '2.0', id: 9, method: 'ping' }]);
  });

  it('never buffers more than 2 MiB, whatever the input', async () => {
    const s = setup();
    await s.t.start();
    // 5 MiB without a newline in 64 KiB chunks, then a single 3 MiB chunk of many small lines.
    await writeChunks(s.input, Buffer.alloc(5 * 1024 * 1024, 0x7a), 64 * 1024);
    await tick();
    expect(s.t.bufferedBytes).toBe(0); // over the limit: discarding, nothing held
    s.input.write('\n');
    const many = Buffer.from(`${req(1)}\n`.repeat(Math.ceil((3 * 1024 * 1024) / (req(1).length + 1))));
    s.input.write(many);
    await waitFor(() => s.out.length >= 1 && s.messages.length > 1000);
    expect(s.out[0]).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: OVERSIZE } });
    expect(s.t.peakBufferedBytes).toBeLessThanOrEqual(MAX);
    expect(s.t.peakBufferedBytes).toBeLessThanOrEqual(MCP_MAX_BUFFER_BYTES);
    expect(
      () =>
        new LineLimitedStdioTransport(new PassThrough(), new PassThrough(), { maxLineBytes: MCP_MAX_BUFFER_BYTES + 1 }),
    ).toThrow(RangeError);
  });

  it('calls onclose when the input ends, and only once', async () => {
    const s = setup();
    await s.t.start();
    s.input.end();
    await waitFor(() => s.closes() === 1);
    await s.t.close();
    await tick();
    expect(s.closes()).toBe(1);
    expect(s.input.listenerCount('data')).toBe(0);
    await expect(s.t.send({ jsonrpc: '2.0', id: 1, result: {} })).rejects.toThrow(/closed/);
  });

  it('send writes one JSON line and waits for drain under backpressure', async () => {
    const input = new PassThrough();
    const output = new PassThrough({ highWaterMark: 16 });
    const t = new LineLimitedStdioTransport(input, output);
    await t.start();
    let resolved = false;
    const p = t.send({ jsonrpc: '2.0', id: 1, result: { text: 'x'.repeat(100) } }).then(() => void (resolved = true));
    await tick();
    expect(resolved).toBe(false); // nobody reads the output yet
    const line = (output.read() as Buffer).toString('utf8');
    await p;
    expect(line).toBe(`${JSON.stringify({ jsonrpc: '2.0', id: 1, result: { text: 'x'.repeat(100) } })}\n`);
    await t.close();
  });
});

describe('LineLimitedStdioTransport with the SDK McpServer and Client', () => {
  it('a 1.5 MiB tools/call rejects quickly with McpError -32700, and the next call succeeds', async () => {
    const clientToServer = new PassThrough();
    const serverToClient = new PassThrough();
    const server = new McpServer({ name: 'transport-test', version: '0.0.0' });
    server.registerTool('echo', { description: 'echo', inputSchema: { text: z.string() } }, async ({ text }) => ({
      content: [{ type: 'text', text }],
    }));
    const logs: string[] = [];
    await server.connect(new LineLimitedStdioTransport(clientToServer, serverToClient, { onLog: (m) => logs.push(m) }));

    // Client side: the SDK's own line transport (same ReadBuffer parsing as StdioClientTransport),
    // reading the server's output and writing the server's input: every byte crosses our parser.
    const client = new Client({ name: 'transport-test-client', version: '0.0.0' });
    await client.connect(new StdioServerTransport(serverToClient, clientToServer));

    const t0 = performance.now();
    const err = await client
      .callTool({ name: 'echo', arguments: { text: 'x'.repeat(1.5 * 1024 * 1024) } }, undefined, { timeout: 5000 })
      .then(
        () => null,
        (e: unknown) => e,
      );
    const elapsed = performance.now() - t0;
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32700);
    expect(elapsed).toBeLessThan(2000);

    const ok = await client.callTool({ name: 'echo', arguments: { text: 'hi' } }, undefined, { timeout: 5000 });
    expect(ok.content).toEqual([{ type: 'text', text: 'hi' }]);
    expect(logs.some((l) => l.includes('discarded'))).toBe(true);

    await client.close();
    await server.close();
  });
});

describe('the end of input', () => {
  it('closes only once every request read before it is answered; notifications wait for nothing', async () => {
    const s = setup();
    await s.t.start();
    s.input.write(`${req(1)}\n${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n${req(2)}`);
    s.input.end(); // the last line has no newline: it is read all the same
    await waitFor(() => s.messages.length === 3);
    await tick();
    expect(s.closes()).toBe(0);
    await s.t.send({ jsonrpc: '2.0', id: 1, result: {} });
    await tick();
    expect(s.closes()).toBe(0);
    await s.t.send({ jsonrpc: '2.0', id: 2, result: {} });
    await waitFor(() => s.closes() === 1);
    expect(s.out).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 2, result: {} },
    ]);
  });
});
