// A PostgreSQL server of the test's own (the machine's binaries, another port, run as the
// `postgres` user), whose data directory sits on a small tmpfs mounted for it, so that a test can
// fill its disk. The write-ahead log lives off that tmpfs (initdb --waldir): the tables' files fill
// up and each statement that needs room fails (SQLSTATE 53100); a full log would stop the server
// instead, which is the server-down case. Root only: mounting needs it.
import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = '/usr/lib/postgresql/15/bin';

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

const asPostgres = (cmd: string, args: string[]) =>
  execFileSync('runuser', ['-u', 'postgres', '--', join(BIN, cmd), ...args], { stdio: 'pipe' });

export interface SmallDiskServer {
  url: string;
  /** Fills the tmpfs to its last byte with a ballast file. */
  fill(): void;
  /** Removes the ballast. */
  free(): void;
  stop(): void;
}

export async function startOnSmallDisk(sizeMb: number): Promise<SmallDiskServer> {
  if (process.getuid?.() !== 0)
    throw new Error('test:pg-faults mounts a tmpfs and must run as root (CI runs it as root); it is never skipped');
  const base = mkdtempSync(join(tmpdir(), 'oc-pgfull-'));
  chmodSync(base, 0o755);
  const mnt = join(base, 'disk');
  execFileSync('mkdir', [mnt]);
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m,mode=0755`, 'tmpfs', mnt]);
  const data = join(mnt, 'data');
  const ballast = join(mnt, 'ballast');
  execFileSync('mkdir', [join(base, 'wal'), join(base, 'run')]);
  execFileSync('chown', ['postgres:postgres', mnt, join(base, 'wal'), join(base, 'run')]);
  const port = await freePort();
  const undo = () => {
    execFileSync('umount', ['-l', mnt]);
    rmSync(base, { recursive: true, force: true });
  };
  try {
    start(data, base, port);
  } catch (e) {
    undo();
    throw e;
  }
  let stopped = false;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    fill: () => fill(ballast),
    free() {
      rmSync(ballast, { force: true });
    },
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        undo();
      }
    },
  };
}

function start(data: string, base: string, port: number) {
  asPostgres('initdb', ['-D', data, `--waldir=${join(base, 'wal')}`, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const opts = `-p ${port} -k ${join(base, 'run')} -c listen_addresses=127.0.0.1 -c fsync=off`;
  asPostgres('pg_ctl', ['-D', data, '-o', opts, '-l', join(base, 'run', 'log'), '-w', 'start']);
}

/** Writes a ballast file until the file system has no byte left. */
function fill(ballast: string) {
  const fd = openSync(ballast, 'a');
  try {
    for (const chunk of [Buffer.alloc(1 << 20, 1), Buffer.alloc(4096, 1), Buffer.alloc(1, 1)])
      for (;;)
        try {
          writeSync(fd, chunk);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw e;
        }
  } finally {
    closeSync(fd);
  }
}
