// The soak's own PostgreSQL: a fresh cluster (initdb) in a temp dir on a free loopback port, run
// with pg_ctl so the soak can restart it under load. Never the machine's server, which other
// processes use. initdb refuses root: as root the cluster belongs to the `postgres` user.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** Debian's PostgreSQL 15 (CI installs it); OPENCOMMS_SOAK_PG_BIN names another bin directory. */
const BIN = process.env.OPENCOMMS_SOAK_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const OWNER = 'postgres';

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

export class SoakPostgres {
  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly asRoot: boolean,
  ) {}

  /** Trust authentication, loopback only, the socket in the data dir (not the system's). */
  static async start(): Promise<SoakPostgres> {
    if (!existsSync(join(BIN, 'initdb')))
      throw new Error(`no PostgreSQL at ${BIN}: install postgresql-15 or set OPENCOMMS_SOAK_PG_BIN`);
    const asRoot = process.getuid?.() === 0;
    const base = mkdtempSync(join(tmpdir(), 'opencomms-soak-pg-'));
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', OWNER]).toString());
      const gid = Number(execFileSync('id', ['-g', OWNER]).toString());
      chownSync(base, uid, gid);
    }
    const pg = new SoakPostgres(join(base, 'data'), await freePort(), asRoot);
    pg.run('initdb', ['-D', pg.dir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
    pg.ctl('start');
    return pg;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private argv(tool: string, args: string[]): [string, string[]] {
    return this.asRoot ? ['runuser', ['-u', OWNER, '--', join(BIN, tool), ...args]] : [join(BIN, tool), args];
  }

  private run(tool: string, args: string[]) {
    const [cmd, argv] = this.argv(tool, args);
    execFileSync(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'], cwd: tmpdir() });
  }

  private ctlArgs(action: 'start' | 'restart' | 'stop', mode: string): string[] {
    const options = `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir}`;
    return [action, '-D', this.dir, '-w', '-t', '60', '-m', mode, '-o', options, '-l', `${this.dir}.log`];
  }

  private ctl(action: 'start' | 'stop', mode = 'fast') {
    this.run('pg_ctl', this.ctlArgs(action, mode));
  }

  /** A restart under load: `immediate` is a crash (no shutdown checkpoint, recovery on start),
   *  `fast` ends every session cleanly first. Either way every connection is cut. Asynchronous, so
   *  the harness goes on killing meanwhile. */
  async restart(mode: 'fast' | 'immediate'): Promise<void> {
    const [cmd, argv] = this.argv('pg_ctl', this.ctlArgs('restart', mode));
    await promisify(execFile)(cmd, argv, { cwd: tmpdir() });
  }

  stop(): void {
    try {
      this.ctl('stop', 'immediate');
    } finally {
      rmSync(join(this.dir, '..'), { recursive: true, force: true });
    }
  }

  /** Who runs the server (for the report). */
  get user(): string {
    return this.asRoot ? OWNER : userInfo().username;
  }
}
