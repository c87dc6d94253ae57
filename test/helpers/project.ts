// Throw-away project directories for installer and CLI tests: files by relative path, a snapshot of
// every file's bytes (to prove "zero writes" and "byte for byte"), cleanup after each test.
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterEach, beforeEach } from 'vitest';

export function useProject(prefix = 'oc-proj ') {
  const ctx = { dir: '' };
  beforeEach(async () => {
    // A space in the path: every installer must cope with it (INS-3).
    ctx.dir = await mkdtemp(join(tmpdir(), prefix));
  });
  afterEach(async () => {
    await rm(ctx.dir, { recursive: true, force: true });
  });
  const at = (rel: string) => join(ctx.dir, rel);
  return {
    get dir() {
      return ctx.dir;
    },
    at,
    async write(rel: string, text: string) {
      await mkdir(dirname(at(rel)), { recursive: true });
      await writeFile(at(rel), text);
    },
    read: (rel: string) => readFile(at(rel), 'utf8'),
    /** Every file under the project, relative path → bytes. */
    async snapshot(): Promise<Record<string, string>> {
      const out: Record<string, string> = {};
      const walk = async (d: string) => {
        for (const e of await readdir(d, { withFileTypes: true })) {
          const p = join(d, e.name);
          if (e.isDirectory()) await walk(p);
          else out[relative(ctx.dir, p)] = await readFile(p, 'utf8');
        }
      };
      await walk(ctx.dir);
      return out;
    },
  };
}
