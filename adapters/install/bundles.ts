// The self-contained files an installer writes into a project: one ESM file each, with no bare
// imports (node: built-ins only), so they run from `.opencomms/` with nothing installed there.
// `npm run build` writes them to dist/; an installer copies the built file, or bundles on the spot
// when dist/ is missing (a source checkout that never ran the build).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { build, type BuildOptions } from 'esbuild';
import { PACKAGE_ROOT, VERSION } from '../../src/version.ts';

export interface BundleSpec {
  /** TypeScript entry, relative to the package root. */
  entry: string;
  /** First line of the bundle: how an existing file is recognised as ours. */
  mark: string;
  /** Minified: the hook runner starts on every prompt, so less to parse is less latency. */
  minify?: boolean;
}

export const HOOK_RUNNER = 'claude-code-hooks.mjs';
export const MCP_BUNDLE = 'opencomms-mcp.mjs';

export const BUNDLES: Record<typeof HOOK_RUNNER | typeof MCP_BUNDLE, BundleSpec> = {
  [HOOK_RUNNER]: { entry: 'adapters/claude-code/hook-runner.ts', mark: '// opencomms-hook-runner', minify: true },
  [MCP_BUNDLE]: { entry: 'adapters/mcp/bundle.ts', mark: '// opencomms-mcp-server' },
};

/** esbuild options shared by every bundle (the OpenCode plugin included). CommonJS dependencies get
 *  a real `require` through createRequire; modules reached only through `import()` stay lazy. */
export function bundleOptions(spec: BundleSpec): BuildOptions {
  return {
    entryPoints: [join(PACKAGE_ROOT, spec.entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    legalComments: 'none',
    minify: spec.minify === true,
    define: { __OPENCOMMS_VERSION__: JSON.stringify(VERSION) },
    banner: {
      js: `${spec.mark} ${VERSION}\nimport { createRequire as __ocCreateRequire } from 'node:module';\nconst require = __ocCreateRequire(import.meta.url);`,
    },
  };
}

export async function bundle(spec: BundleSpec): Promise<string> {
  const out = await build({ ...bundleOptions(spec), write: false });
  return out.outputFiles[0]!.text;
}

/** The bundle's text: the built file when it is this version's, else built now. */
export async function bundleText(name: keyof typeof BUNDLES): Promise<string> {
  const spec = BUNDLES[name];
  try {
    const built = await readFile(join(PACKAGE_ROOT, 'dist', name), 'utf8');
    if (built.startsWith(`${spec.mark} ${VERSION}\n`)) return built;
  } catch {
    // not built: bundle below
  }
  return bundle(spec);
}

/** Is this file's text one of our bundles (any version)? */
export const isOurBundle = (name: keyof typeof BUNDLES, text: string | null) => text !== null && text.startsWith(`${BUNDLES[name].mark} `);
