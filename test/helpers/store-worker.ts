// Child process for the store's multi-process tests.
//   increment <project> <count> <barrier-file>: waits for the barrier file, then does <count>
//     locked read-modify-write increments of the counter kept in errors[0].message.
//   hold <project>: takes the state lock, prints "locked", keeps it (refreshed) until killed.
//   hold-until <project> <file>: the same, but releases the lock once <file> exists, then exits.
import { access } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { FileStore } from '../../src/store/file/store.ts';
import { withLock } from '../../src/store/file/lock.ts';
import { ensureDir, resolvePaths } from '../../src/store/paths.ts';
import { counterOf, incrementCounter } from './store-fixtures.ts';

const [mode, project, ...rest] = process.argv.slice(2);

/** Resolves once `file` exists (the test's signal). */
async function fileExists(file: string) {
  for (;;) {
    try {
      return await access(file);
    } catch {
      await sleep(2);
    }
  }
}
if (!project) throw new Error('usage: store-worker <mode> <project> ...');

if (mode === 'increment') {
  const [count, barrier] = rest;
  const store = new FileStore(project);
  process.stdout.write('ready\n');
  await fileExists(barrier!);
  for (let i = 0; i < Number(count); i++) await store.mutate(incrementCounter);
  process.stdout.write(`done ${counterOf(await store.read())}\n`);
  store.close();
} else if (mode === 'hold') {
  const paths = resolvePaths(project);
  await ensureDir(paths);
  await withLock(paths, async () => {
    process.stdout.write('locked\n');
    await new Promise(() => setInterval(() => {}, 1000)); // keeps the loop alive; killed by the test
  });
} else if (mode === 'hold-until') {
  const paths = resolvePaths(project);
  await ensureDir(paths);
  await withLock(paths, async () => {
    process.stdout.write('locked\n');
    await fileExists(rest[0]!);
  });
} else {
  throw new Error(`unknown mode ${mode}`);
}
