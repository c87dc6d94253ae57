// A project whose files refuse every write for the duration of `fn`, the way a read-only mount
// does: as root (who writes through any permission bits) a read-only bind mount over the
// directory; otherwise every directory and file under it loses its write bits. Either way it is
// undone afterwards, and a setup that cannot be made throws (the test fails, never passes blind).
import { execFileSync } from 'node:child_process';
import { chmodSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function modesUnder(dir: string, out: Array<[string, number]> = []): Array<[string, number]> {
  out.push([dir, statSync(dir).mode & 0o7777]);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) modesUnder(p, out);
    else if (e.isFile()) out.push([p, statSync(p).mode & 0o7777]);
  }
  return out;
}

export async function withReadOnly<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  if (process.getuid?.() === 0) {
    execFileSync('mount', ['--bind', dir, dir]);
    try {
      execFileSync('mount', ['-o', 'remount,ro,bind', dir]);
      return await fn();
    } finally {
      // Lazily: a server under test may still hold a read handle it opened through the mount;
      // new opens reach the writable directory at once, as after a remount read-write.
      execFileSync('umount', ['-l', dir]);
    }
  }
  const modes = modesUnder(dir);
  for (const [p, m] of modes) chmodSync(p, m & ~0o222);
  try {
    return await fn();
  } finally {
    for (const [p, m] of modes.reverse()) chmodSync(p, m);
  }
}
