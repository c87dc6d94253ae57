// One copy of each machine: the generated path tests, the diagrams and the inspector read the same machine
// definitions, and no second copy of a machine exists anywhere. Stately's own parser looks for
// machines in every source file of the repository; the four are found only in machines/. The
// diagrams (visualizations/, kept current by test/visualizations.test.ts), the path tests and the
// inspector (src/inspect/) take them from machines/index.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MACHINES } from '../../machines/index.ts';
import { extractor } from './extract.ts';

const root = join(import.meta.dirname, '..', '..');
const SKIP = new Set(['node_modules', '.git', 'dist', 'real']);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    if (SKIP.has(d.name) || d.name.startsWith('.')) return [];
    const p = join(dir, d.name);
    if (d.isDirectory()) return sources(p);
    return /\.(ts|mts|js|mjs)$/.test(d.name) ? [p] : [];
  });
}

describe('one copy of each machine', () => {
  it("Stately's parser finds the four machines in machines/ and nowhere else", () => {
    const found: string[] = [];
    for (const f of sources(root)) {
      const text = readFileSync(f, 'utf8');
      if (!text.includes('createMachine')) continue;
      let r: ReturnType<typeof extractor.extractMachinesFromFile> = null;
      try {
        r = extractor.extractMachinesFromFile(text);
      } catch {
        continue; // syntax the parser does not take (it names no machine of ours then)
      }
      for (const m of r?.machines ?? []) {
        const id = (m?.toConfig() as { id?: string } | null)?.id;
        if (id && id in MACHINES) found.push(`${relative(root, f)}:${id}`);
      }
    }
    expect(found.sort()).toEqual(
      Object.keys(MACHINES)
        .map((n) => `machines/${n}.ts:${n}`)
        .sort(),
    );
  });

  it('the path tests, the diagrams and the inspector import the machines from machines/index.ts', () => {
    const reads = (file: string) => readFileSync(join(root, file), 'utf8');
    for (const file of ['test/machines/paths.ts', 'scripts/viz.ts', 'src/inspect/model.ts', 'src/inspect/send.ts'])
      expect(reads(file), file).toMatch(/from '\.\.\/(\.\.\/)?machines\/index\.ts'/);
  });
});
