// The pure framer, without streams: what a sequence of chunks becomes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { frameLine, LineFramer, PARSE_ERROR } from '../../../adapters/mcp/line-framer.ts';

const ping = (id: number) => `{"jsonrpc":"2.0","id":${id},"method":"ping"}`;

describe('LineFramer', () => {
  it('whatever the chunking, the same lines come out in order (CRLF and LF, blank lines skipped)', () => {
    const text = Buffer.from(`${ping(1)}\r\n\n${ping(2)}\n  \n${ping(3)}\r\n`);
    fc.assert(
      fc.property(fc.array(fc.nat(text.length), { maxLength: 12 }), (cuts) => {
        const framer = new LineFramer(1024);
        const points = [...new Set([0, ...cuts, text.length])].sort((a, b) => a - b);
        const out = points.slice(1).flatMap((end, i) => framer.push(text.subarray(points[i], end)));
        expect(out.map((f) => (f.kind === 'message' && 'id' in f.message ? f.message.id : f.kind))).toEqual([1, 2, 3]);
        expect(framer.pendingBytes).toBe(0);
      }),
    );
  });

  it('a line over the limit is one -32700 frame with the recovered id; the buffer stays under the limit', () => {
    const framer = new LineFramer(64);
    const big = `{"jsonrpc":"2.0","id":7,"method":"x","params":{"p":"${'é'.repeat(100)}"}}\n`;
    const out = [
      ...framer.push(Buffer.from(big.slice(0, 40))),
      ...framer.push(Buffer.from(big.slice(40))),
      ...framer.push(Buffer.from(`${ping(8)}\n`)),
    ];
    expect(out[0]).toMatchObject({ kind: 'error', frame: { id: 7, error: { code: PARSE_ERROR } } });
    expect(out[1]).toMatchObject({ kind: 'message', message: { id: 8 } });
    expect(framer.peakBufferedBytes).toBeLessThanOrEqual(64);
  });

  it('frameLine: malformed JSON, non-JSON-RPC, and a message', () => {
    expect(frameLine('{')).toMatchObject({ kind: 'error', frame: { id: null, error: { code: -32700 } } });
    expect(frameLine('{"id":3,"foo":1}')).toMatchObject({ kind: 'error', frame: { id: 3, error: { code: -32600 } } });
    expect(frameLine(ping(4))).toMatchObject({ kind: 'message', message: { method: 'ping' } });
    expect(frameLine('   ')).toBeNull();
  });
});
