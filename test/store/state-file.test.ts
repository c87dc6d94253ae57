// state.json's text (FEATURES.md §2: pretty JSON, 2-space indent) built in pieces for a compaction,
// and the atomic write of a text given in pieces.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeAtomicSync } from '../../src/store/file/atomic.ts';
import { serialize, serializeChunks } from '../../src/store/file/state-file.ts';
import type { State } from '../../src/protocol/schema.ts';
import { tempProject } from '../helpers/store-fixtures.ts';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup } = await tempProject()));
afterEach(() => cleanup());

/** What the text must be: JSON.stringify's own, the journal id after the schema version. */
const expected = (state: object, journalId: string | null) =>
  `${JSON.stringify(journalId ? { schema_version: (state as { schema_version?: unknown }).schema_version, journal_id: journalId, journal_created: true, ...state } : state, null, 2)}\n`;

// Keys as a state has them, and the awkward ones: integer-like (ordered first by JSON), quotes,
// newlines, non-ASCII; values with undefined (left out by JSON) wherever a map may hold one.
const key = fc.oneof(fc.string(), fc.constantFrom('0', '12', '7', 'a"b', 'line\nbreak', 'é', '__proto__x'));
const value = fc.jsonValue({ maxDepth: 3 });
const map = fc.dictionary(
  key,
  fc.oneof({ weight: 5, arbitrary: value }, { weight: 1, arbitrary: fc.constant(undefined) }),
  { maxKeys: 600 },
);
const state = fc.record({
  schema_version: fc.constant(2),
  channels: map,
  messages: map,
  queues: fc.dictionary(key, fc.array(fc.string(), { maxLength: 3 })),
  errors: fc.array(value, { maxLength: 3 }),
  extra: fc.oneof(value, fc.constant(undefined), map),
});

describe('serializeChunks', () => {
  it('joins to exactly JSON.stringify(…, null, 2) of the state, with or without a journal id', () => {
    fc.assert(
      fc.property(state, fc.option(fc.stringMatching(/^[0-9a-f]{16}$/), { nil: null }), (s, id) => {
        expect(serialize(s as unknown as State, id)).toBe(expected(s, id));
      }),
      { numRuns: 200 },
    );
  });

  it('gives a large map in several pieces, none holding the whole', () => {
    const messages = Object.fromEntries(
      Array.from({ length: 2000 }, (_, i) => [`ocm_${i}`, { content: 'x'.repeat(200), i }]),
    );
    const s = {
      schema_version: 2,
      channels: {},
      messages,
      queues: {},
      delivered_to: {},
      errors: [],
    } as unknown as State;
    const pieces = [...serializeChunks(s, null)];
    const whole = pieces.join('');
    expect(whole).toBe(expected(s, null));
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThan(whole.length / 4);
  });
});

describe('writeAtomicSync', () => {
  it('writes a text given in pieces as the pieces joined', async () => {
    const pieces = Array.from({ length: 5000 }, (_, i) => `${i}:${'é'.repeat(i % 50)}\n`);
    const file = join(dir, 'out.txt');
    writeAtomicSync(file, pieces.values(), { tmpPrefix: '.t' });
    expect(await readFile(file, 'utf8')).toBe(pieces.join(''));
  });
});
