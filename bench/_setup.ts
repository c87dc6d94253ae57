import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { writeBinding } from '../src/store/binding.ts';
import { hookBenchProject } from './hooks.ts';
const out: Record<string, string> = {};
for (const kind of ['file', 'pg']) {
  const dir = mkdtempSync(join(tmpdir(), `hk-${kind}-`));
  if (kind === 'pg')
    await writeBinding(dir, 'postgres://postgres@127.0.0.1:5432/test', `hk${randomBytes(3).toString('hex')}`);
  const { rt, runner, input } = await hookBenchProject(dir);
  await rt.close();
  execFileSync(process.execPath, [runner, 'auto', dir], {
    input: input('SessionStart'),
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  out[kind] = dir;
}
console.log(JSON.stringify(out));
