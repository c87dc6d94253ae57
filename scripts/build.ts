// `npm run build` (also `prepare`): bundles the CLI into dist/opencomms.mjs so `npx opencomms`
// and the MCP server start as plain JavaScript (no TypeScript loader: ~40% less memory, faster
// start). esbuild stays external: only the installer needs it, at install time. Also builds the
// self-contained files the installers copy into a project (the Claude Code / Codex hook runner
// and the MCP server bundle), so an install does not bundle on the spot.
import { build } from 'esbuild';
import { join } from 'node:path';
import { BUNDLES, bundleOptions } from '../adapters/install/bundles.ts';

const root = join(import.meta.dirname, '..');
await build({
  entryPoints: [join(root, 'src', 'cli', 'main.ts')],
  outfile: join(root, 'dist', 'opencomms.mjs'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  legalComments: 'none',
  logLevel: 'warning',
});
for (const [name, spec] of Object.entries(BUNDLES))
  await build({ ...bundleOptions(spec), outfile: join(root, 'dist', name), logLevel: 'warning' });
