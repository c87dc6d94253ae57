// The committed diagrams and the README's copies must be what the machines generate now.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MACHINES } from '../machines/index.ts';
import { renderAll } from '../src/viz/mermaid.ts';
import { machinesByName, readmeWithDiagrams } from '../src/viz/readme.ts';

const root = join(import.meta.dirname, '..');
const files = renderAll(machinesByName(MACHINES));

describe('visualizations are current (run `npm run viz` after changing a machine)', () => {
  it.each(Object.keys(files))('visualizations/%s', (file) => {
    expect(readFileSync(join(root, 'visualizations', file), 'utf8')).toBe(files[file]);
  });
  it('README.md embeds the current diagrams', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readmeWithDiagrams(readme, files)).toBe(readme);
  });
  it('every diagram shows guards on its edges', () => {
    for (const name of ['envelope', 'recipient', 'channel']) expect(files[`${name}.mmd`]).toMatch(/\[[A-Za-z]+\]/);
  });
});
