// The self-contained files an installer writes into a project: one ESM file each, with no bare
// imports (node: built-ins only), so they run from `.opencomms/` with nothing installed there.
// `npm run build` writes them to dist/; an installer copies the built file, or bundles on the spot
// when dist/ is missing (a source checkout that never ran the build).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BuildOptions, Plugin } from 'esbuild';
import { PACKAGE_ROOT, VERSION } from '../../src/version.ts';
import { HOOK_RUNNER, HOOK_RUNNER_FULL, MCP_BUNDLE } from './bundle-names.ts';
import type { FileChange } from './files.ts';

export interface BundleSpec {
  /** TypeScript entry, relative to the package root. */
  entry: string;
  /** First line of the bundle: how an existing file is recognised as ours. */
  mark: string;
  /** Minified: the hook runner starts on every prompt (and its full path whenever mail waits), so
   *  less to parse is less latency. */
  minify?: boolean;
  /** Node built-ins taken with `process.getBuiltinModule`, and no `require`: for the hook runner's
   *  fast entry, which runs on every prompt (see `builtinsOnDemand`). Its code may then use no
   *  CommonJS package. */
  lean?: boolean;
}

export { HOOK_RUNNER, HOOK_RUNNER_FULL, MCP_BUNDLE } from './bundle-names.ts';

export const BUNDLES: Record<typeof HOOK_RUNNER | typeof HOOK_RUNNER_FULL | typeof MCP_BUNDLE, BundleSpec> = {
  [HOOK_RUNNER]: {
    entry: 'adapters/claude-code/hook-runner.ts',
    mark: '// opencomms-hook-runner',
    minify: true,
    lean: true,
  },
  [HOOK_RUNNER_FULL]: {
    entry: 'adapters/claude-code/hook-full.ts',
    mark: '// opencomms-hook-runner-full',
    minify: true,
  },
  [MCP_BUNDLE]: { entry: 'adapters/mcp/main.ts', mark: '// opencomms-mcp-server', minify: true },
};

/** Each `node:` import as the built-in's own exports object, taken when the importing module runs.
 *  An ESM import of a built-in builds its whole namespace, which reads every lazy export: `node:fs`
 *  then loads the stream modules for `ReadStream`, a few ms of every prompt for nothing. */
const builtinsOnDemand: Plugin = {
  name: 'builtins-on-demand',
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (a) => ({ path: a.path, namespace: 'builtin' }));
    b.onLoad({ filter: /.*/, namespace: 'builtin' }, (a) => ({
      contents: `module.exports = Object.create(process.getBuiltinModule(${JSON.stringify(a.path)}));`,
      loader: 'js',
    }));
  },
};

/** esbuild options shared by every bundle (the OpenCode plugin included). CommonJS dependencies get
 *  a real `require` through createRequire (a lean bundle has none); modules reached only through
 *  `import()` stay lazy. */
export function bundleOptions(spec: BundleSpec): BuildOptions {
  const requireShim = `\nimport { createRequire as __ocCreateRequire } from 'node:module';\nconst require = __ocCreateRequire(import.meta.url);`;
  // A Node without getBuiltinModule (before 20.16; `doctor` names the version needed) gets the
  // hook runner's fail-open answer rather than a stack trace.
  const leanGuard = `\nif (!process.getBuiltinModule) { process.stdout.write('{}\\n'); process.exit(0); }`;
  return {
    entryPoints: [join(PACKAGE_ROOT, spec.entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    legalComments: 'none',
    minify: spec.minify === true,
    define: { __OPENCOMMS_VERSION__: JSON.stringify(VERSION) },
    banner: { js: `${spec.mark} ${VERSION}${spec.lean ? leanGuard : requireShim}` },
    plugins: spec.lean ? [builtinsOnDemand] : [],
  };
}

export async function bundle(spec: BundleSpec): Promise<string> {
  // Loaded when a bundle is built (an install from a checkout without dist/), not on every start.
  const { build } = await import('esbuild');
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

export type BundleName = keyof typeof BUNDLES;

/** The hook runner is two files: the fast entry and its full path. */
export const RUNNER_BUNDLES: readonly BundleName[] = [HOOK_RUNNER, HOOK_RUNNER_FULL];
/** What an install of Claude Code or Codex writes: the runner and the MCP server. */
export const HOST_BUNDLES: readonly BundleName[] = [...RUNNER_BUNDLES, MCP_BUNDLE];

/** `name → path` of every host bundle, to read before planning. */
export const bundlePaths = (project: string) =>
  Object.fromEntries(HOST_BUNDLES.map((n) => [n, bundlePath(project, n)]));

export const bundlePath = (project: string, name: BundleName) => join(project, '.opencomms', name);

/** Every bundle's text, for the planners. */
export async function allBundles(): Promise<Record<BundleName, string>> {
  const names = Object.keys(BUNDLES) as BundleName[];
  return Object.fromEntries(await Promise.all(names.map(async (n) => [n, await bundleText(n)]))) as Record<
    BundleName,
    string
  >;
}

/** Writes of these bundles into the project. */
export const writeBundles = (
  project: string,
  names: readonly BundleName[],
  texts: Record<BundleName, string>,
): FileChange[] => names.map((n) => ({ path: bundlePath(project, n), content: texts[n] }));

/** Removals of these bundles, where the file there is ours. */
export const removeBundles = (
  project: string,
  names: readonly BundleName[],
  files: Map<string, string | null>,
): FileChange[] =>
  names
    .filter((n) => isOurBundle(n, files.get(bundlePath(project, n)) ?? null))
    .map((n) => ({ path: bundlePath(project, n), content: null }));

/** Is this file's text one of our bundles (any version)? */
const isOurBundle = (name: BundleName, text: string | null) => text?.startsWith(`${BUNDLES[name].mark} `);
