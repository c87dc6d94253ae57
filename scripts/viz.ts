// `npm run viz`: regenerates visualizations/ from machines/index.ts and the diagrams of
// docs/architecture.md. A file whose text is already what it would be is not written, and the
// report says which were written and that the rest were current.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MACHINES } from '../machines/index.ts';
import { renderAll } from '../src/viz/mermaid.ts';
import { DIAGRAMS_DOC, docWithDiagrams, machinesByName } from '../src/viz/doc-diagrams.ts';

const read = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
};

/** Writes what differs under `root`; returns the report, one line per file written and a last line. */
export function regenerate(root: string): string[] {
  const files = renderAll(machinesByName(MACHINES));
  const wanted: Array<[string, string]> = Object.entries(files).map(([file, text]) => [`visualizations/${file}`, text]);
  const doc = read(join(root, DIAGRAMS_DOC));
  if (doc !== null) wanted.push([DIAGRAMS_DOC, docWithDiagrams(doc, files)]);
  const written: string[] = [];
  for (const [rel, text] of wanted) {
    if (read(join(root, rel)) === text) continue;
    writeFileSync(join(root, rel), text);
    written.push(rel);
  }
  return written.length
    ? [...written.map((f) => `wrote ${f}`), `${wanted.length - written.length} other file(s) were current.`]
    : [`Every diagram is current (${wanted.length} files); nothing was written.`];
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  for (const line of regenerate(join(import.meta.dirname, '..'))) console.log(line);
