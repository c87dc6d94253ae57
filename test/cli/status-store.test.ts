// `opencomms status` names the store that holds the project: the files, or the PostgreSQL server
// and project key of the binding (never a file that a PostgreSQL project does not use).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SCHEMA_VERSION } from '../../src/protocol/limits.ts';
import { describeUrl } from '../../src/store/postgres/connect.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../helpers/postgres.ts';
import { cli } from './fixtures.ts';

let dir: string;
let key: string | null = null;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-status-store-'))));
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
  if (key) await dropProject(key);
  key = null;
});

describe('status names its store', () => {
  it('on the files: state.json under .opencomms', async () => {
    const r = await cli('status', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out.split('\n')[1]).toBe(`State schema: v${SCHEMA_VERSION} at .opencomms/state.json`);
  });

  it('on PostgreSQL: the server and the project key, and no state.json', async () => {
    key = newProjectKey('st');
    const url = testDatabaseUrl();
    await mkdir(join(dir, '.opencomms'), { recursive: true });
    await writeFile(join(dir, '.opencomms', 'store.json'), JSON.stringify({ kind: 'postgres', url, key }));
    expect((await cli('channel', 'create', 'alpha', '--project', dir)).code).toBe(0);
    const r = await cli('status', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out.split('\n')[1]).toBe(
      `State schema: v${SCHEMA_VERSION} in PostgreSQL at ${describeUrl(url)}, project key ${key}`,
    );
    expect(r.out).not.toContain('state.json');
    expect(r.out).toContain('alpha');
  });
});
