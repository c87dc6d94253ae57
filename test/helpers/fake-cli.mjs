#!/usr/bin/env node
// A stand-in for `claude` / `codex` in spawn tests: appends {argv, pid, at, member} to $FAKE_CLI_LOG, prints
// something on both streams (which must never reach an error record), waits $FAKE_CLI_MS, and exits
// with the code in $FAKE_CLI_EXIT_FILE (default 0), so a test can flip it between runs.
import { appendFileSync, readFileSync } from 'node:fs';

appendFileSync(
  process.env.FAKE_CLI_LOG,
  `${JSON.stringify({ argv: process.argv.slice(2), pid: process.pid, at: Date.now(), member: process.env.OPENCOMMS_MEMBER_ID ?? null })}\n`,
);
process.stdout.write('SECRET-STDOUT of the fake CLI\n');
process.stderr.write('SECRET-STDERR of the fake CLI\n');
let code = 0;
try {
  code = Number(readFileSync(process.env.FAKE_CLI_EXIT_FILE, 'utf8').trim()) || 0;
} catch {
  // no exit file: success
}
setTimeout(() => process.exit(code), Number(process.env.FAKE_CLI_MS ?? 0));
