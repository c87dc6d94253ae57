// `npm run build` (also `prepare`):
// - dist/opencomms.mjs: the CLI (`npx opencomms`), plain JavaScript (no TypeScript loader);
// - dist/opencomms-mcp.mjs: the MCP server alone, self-contained (every package bundled and
//   minified: one file to parse instead of hundreds to resolve, so it starts faster than a
//   minimal MCP SDK server loading from node_modules). `bin/opencomms.js mcp` runs it, and an
//   installer copies it into a project's `.opencomms/`.
// esbuild stays external: only the installer needs it, at install time.
import { build } from 'esbuild';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const common = { bundle: true, platform: 'node', format: 'esm', target: 'node20', legalComments: 'none', logLevel: 'warning' } as const;

await build({
  ...common,
  entryPoints: [join(root, 'src', 'cli', 'main.ts')],
  outfile: join(root, 'dist', 'opencomms.mjs'),
  packages: 'external',
});

await build({
  ...common,
  entryPoints: [join(root, 'adapters', 'mcp', 'main.ts')],
  outfile: join(root, 'dist', 'opencomms-mcp.mjs'),
  minify: true,
  // Bundled CommonJS packages call require(); an ES module has none of its own.
  banner: { js: "import { createRequire as __ocRequire } from 'node:module'; const require = __ocRequire(import.meta.url);" },
});
