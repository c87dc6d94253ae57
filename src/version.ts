// The package version and directory, read from the nearest package.json named "opencomms" above this module
// (the same code runs from src/ through tsx and bundled from dist/).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function find(): { root: string; version: string } {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'opencomms' && pkg.version) return { root: dir, version: pkg.version };
    } catch {
      // not here: keep walking up
    }
    const up = dirname(dir);
    if (up === dir) throw new Error('opencomms: cannot find its package.json');
    dir = up;
  }
}

/** Set by the bundler for files installed into a project (`.opencomms/*.mjs`), which run far from
 *  any package.json. */
declare const __OPENCOMMS_VERSION__: string | undefined;
const bundled = typeof __OPENCOMMS_VERSION__ === 'string' ? __OPENCOMMS_VERSION__ : null;
const pkg = bundled === null ? find() : { root: '', version: bundled };
export const VERSION = pkg.version;
/** The package directory (sources ship with it: the installer bundles the plugin from them);
 *  empty inside an installed bundle, which never installs anything. */
export const PACKAGE_ROOT = pkg.root;
