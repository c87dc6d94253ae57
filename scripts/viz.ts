// `npm run viz`: regenerates visualizations/ from machines/index.ts and the diagrams of docs/architecture.md.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MACHINES } from '../machines/index.ts';
import { renderAll } from '../src/viz/mermaid.ts';
import { DIAGRAMS_DOC, docWithDiagrams, machinesByName } from '../src/viz/doc-diagrams.ts';

const root = join(import.meta.dirname, '..');
const files = renderAll(machinesByName(MACHINES));
for (const [file, text] of Object.entries(files)) {
  writeFileSync(join(root, 'visualizations', file), text);
  console.log(`wrote visualizations/${file}`);
}
const docPath = join(root, DIAGRAMS_DOC);
writeFileSync(docPath, docWithDiagrams(readFileSync(docPath, 'utf8'), files));
console.log(`updated the diagrams of ${DIAGRAMS_DOC}`);
