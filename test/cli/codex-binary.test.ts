// `opencomms codex` finds the Codex it will run before it starts a pseudo-terminal, so a missing
// one is host_not_found in one line instead of node-pty's "execvp(3) failed.".
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codexBinary } from '../../src/cli/commands/codex.ts';
import { RefusalError } from '../../src/protocol/result.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-codex-bin-'));
  await writeFile(join(dir, 'codex'), '#!/bin/sh\n');
  await chmod(join(dir, 'codex'), 0o755);
  await writeFile(join(dir, 'not-exec'), 'x');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const reason = (env: NodeJS.ProcessEnv) => {
  try {
    codexBinary(env);
    return null;
  } catch (e) {
    return e instanceof RefusalError ? e.refusal : e;
  }
};

describe.skipIf(process.platform === 'win32')('the Codex binary', () => {
  it('codex on the PATH, or the executable OPENCOMMS_CODEX_BIN names', () => {
    expect(codexBinary({ PATH: `/nonexistent:${dir}` })).toBe('codex');
    expect(codexBinary({ PATH: '', OPENCOMMS_CODEX_BIN: join(dir, 'codex') })).toBe(join(dir, 'codex'));
  });

  it('none on the PATH, or a variable naming no executable file, is host_not_found', () => {
    expect(reason({ PATH: '/nonexistent' })).toMatchObject({ data: { reason: 'host_not_found' } });
    expect(reason({ PATH: dir, OPENCOMMS_CODEX_BIN: join(dir, 'not-exec') })).toMatchObject({
      data: { reason: 'host_not_found' },
      message: expect.stringContaining(`OPENCOMMS_CODEX_BIN names ${join(dir, 'not-exec')}`),
    });
    expect(reason({ PATH: dir, OPENCOMMS_CODEX_BIN: dir })).toMatchObject({ data: { reason: 'host_not_found' } });
  });
});
