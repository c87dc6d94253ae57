// Loading the PostgreSQL store (and with it `pg`) in a fresh Node loads no fetch implementation
// and leaves no `navigator` behind: every entry point bundles the store, so every process would
// pay for it.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');

it('loading the store loads no fetch implementation and leaves no navigator behind', () => {
  const script = `
    const before = typeof navigator;
    await import(${JSON.stringify(join(ROOT, 'src', 'store', 'postgres', 'store.ts'))});
    console.log(JSON.stringify({
      undici: process.moduleLoadList.filter((m) => m.includes('undici')).length,
      navigator: typeof navigator === before,
    }));`;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  expect(JSON.parse(out.trim().split('\n').at(-1)!)).toEqual({ undici: 0, navigator: true });
});
