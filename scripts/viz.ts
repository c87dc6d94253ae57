// `npm run viz`: regenerates visualizations/ from machines/index.ts and the README's diagrams.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MACHINES } from '../machines/index.ts';
import { renderAll } from '../src/viz/mermaid.ts';
import { machinesByName, readmeWithDiagrams } from '../src/viz/readme.ts';

const root = join(import.meta.dirname, '..');
const files = renderAll(machinesByName(MACHINES));
for (const [file, text] of Object.entries(files)) {
  writeFileSync(join(root, 'visualizations', file), text);
  console.log(`wrote visualizations/${file}`);
}
const readmePath = join(root, 'README.md');
writeFileSync(readmePath, readmeWithDiagrams(readFileSync(readmePath, 'utf8'), files));
console.log('updated README.md diagrams');
