// A snapshot's pieces (json-pieces.ts) joined are the JSON of the state, each about the size asked.
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { jsonPieces } from '../../../src/store/postgres/json-pieces.ts';

it('the pieces joined are JSON.stringify of the value, for any JSON value and piece size', () => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 1, max: 200 }), (v, size) => {
      expect(jsonPieces(v, size).join('')).toBe(JSON.stringify(v));
    }),
  );
});

it('what JSON leaves out is left out, as JSON.stringify does (undefined in an object, null in an array)', () => {
  const v = { a: undefined, b: [undefined, () => 1, 2], c: { d: undefined, e: new Date(0) }, f: Symbol('x') };
  expect(jsonPieces(v, 4).join('')).toBe(JSON.stringify(v));
});

it('no piece passes the size by more than one value written whole (an entry of a map, an id of a queue)', () => {
  const state = {
    messages: Object.fromEntries(
      Array.from({ length: 2000 }, (_, i) => [`ocm_${i}`, { content: 'x'.repeat(200), n: i }]),
    ),
    queues: { s: Array.from({ length: 3000 }, (_, i) => `ocm_${i}`) },
  };
  const pieces = jsonPieces(state, 4096);
  expect(pieces.join('')).toBe(JSON.stringify(state));
  expect(pieces.length).toBeGreaterThan(100);
  for (const p of pieces) expect(p.length).toBeLessThan(4096 + 300);
});
