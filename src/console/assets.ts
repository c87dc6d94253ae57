// What the console serves besides the API: the page (three files shipped in src/console/page/,
// read once at start) and the machine diagrams, drawn from the machines' JSON (what `npm run viz`
// writes to visualizations/*.json) by the function that draws visualizations/*.svg. Nothing
// comes from a CDN.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MACHINES } from '../../machines/index.ts';
import { machinesByName } from '../viz/doc-diagrams.ts';
import { toSvg, type MachineJson } from '../viz/svg.ts';
import { PACKAGE_ROOT } from '../version.ts';

export interface Asset {
  type: string;
  body: string;
}

const PAGE_FILES: Record<string, [file: string, type: string]> = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/style.css': ['style.css', 'text/css; charset=utf-8'],
};

export function loadAssets(): Map<string, Asset> {
  const dir = join(PACKAGE_ROOT, 'src', 'console', 'page');
  const out = new Map<string, Asset>();
  for (const [path, [file, type]] of Object.entries(PAGE_FILES))
    out.set(path, { type, body: readFileSync(join(dir, file), 'utf8') });
  const diagrams = Object.fromEntries(
    Object.entries(machinesByName(MACHINES)).map(([name, m]) => [
      name,
      toSvg(JSON.parse(JSON.stringify(m.toJSON())) as MachineJson, { standalone: false }),
    ]),
  );
  out.set('/api/machines', {
    type: 'application/json; charset=utf-8',
    body: JSON.stringify({ ok: true, message: 'Machine diagrams.', data: diagrams }),
  });
  return out;
}
