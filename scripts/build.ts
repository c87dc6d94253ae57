// `npm run build` (also `prepare`):
// - dist/opencomms.mjs: the CLI (`npx opencomms`), plain JavaScript (no TypeScript loader);
// - the self-contained files the installers copy into a project (adapters/install/bundles.ts):
//   the Claude Code / Codex hook runner and the MCP server. The MCP server bundle has every
//   package inside and is minified (one file to parse instead of hundreds to resolve, so it starts
//   faster than a minimal MCP SDK server loading from node_modules); `bin/opencomms.js mcp` runs it.
// esbuild stays external to the CLI: only the installer needs it, at install time.
import { build } from 'esbuild';
import { join } from 'node:path';
import { BUNDLES, bundleOptions } from '../adapters/install/bundles.ts';

const root = join(import.meta.dirname, '..');
const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  legalComments: 'none',
  logLevel: 'warning',
} as const;

await build({
  ...common,
  entryPoints: [join(root, 'src', 'cli', 'main.ts')],
  outfile: join(root, 'dist', 'opencomms.mjs'),
  packages: 'external',
});

for (const [name, spec] of Object.entries(BUNDLES))
  await build({ ...bundleOptions(spec), outfile: join(root, 'dist', name), logLevel: 'warning' });
