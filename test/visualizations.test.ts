// The committed diagrams and docs/architecture.md's copies must be what the machines generate now.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MACHINES } from '../machines/index.ts';
import { renderAll } from '../src/viz/mermaid.ts';
import { DIAGRAMS_DOC, docWithDiagrams, machinesByName } from '../src/viz/doc-diagrams.ts';

const root = join(import.meta.dirname, '..');
const files = renderAll(machinesByName(MACHINES));

describe('visualizations are current (run `npm run viz` after changing a machine)', () => {
  it.each(Object.keys(files))('visualizations/%s', (file) => {
    expect(readFileSync(join(root, 'visualizations', file), 'utf8')).toBe(files[file]);
  });
  it(`${DIAGRAMS_DOC} embeds the current diagrams`, () => {
    const doc = readFileSync(join(root, DIAGRAMS_DOC), 'utf8');
    expect(doc).toContain('<!-- diagram:envelope -->');
    expect(docWithDiagrams(doc, files)).toBe(doc);
  });
  it('every diagram shows guards on its edges', () => {
    for (const name of ['envelope', 'recipient', 'channel']) expect(files[`${name}.mmd`]).toMatch(/\[[A-Za-z]+\]/);
  });
});
