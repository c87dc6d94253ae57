// Where the soak's project lives and where its processes run. The file store: one directory, every
// process in this network namespace. `--store postgres`: the soak's own PostgreSQL (postgres.ts),
// every process on this machine. `--machines N`: the same server, the writers and owners spread
// over N machines built as Linux network namespaces (test/netns/net.ts), each with its own machine
// id, reaching the server over its veth pair; the harness and the checker stay here.
import { spawn, type ChildProcess } from 'node:child_process';
import { FORWARD_PORT, Machine } from '../../test/netns/net.ts';
import { Runtime, type RuntimeOptions } from '../../src/runtime/runtime.ts';
import { processTag } from '../../src/runtime/process.ts';
import { openStore } from '../../src/store/index.ts';
import { PgStore } from '../../src/store/postgres/store.ts';
import { MEMBERS, OWNERS, SOAK_PG, WRITERS, type PgTarget } from './plan.ts';
import { SoakPostgres } from './postgres.ts';

/** The project key of the soak's schema (the server is the soak's own, so no other project). */
export const SOAK_KEY = 'soak';
/** Computer numbers of the soak's namespaces (ocm51…): apart from `npm run test:machines`' 1 and 2. */
const FIRST_MACHINE = 51;
/** Inside a namespace each worker forwards its own loopback port (several share a namespace). */
const LOCAL_PORT_BASE = 25_432;

export class Target {
  readonly machines: Machine[];
  /** Which machine each member's processes run on (owners first, so each owner has a machine). */
  readonly placement = new Map<string, Machine>();

  private constructor(
    readonly project: string,
    readonly pg: SoakPostgres | null,
    machines: number,
  ) {
    this.machines = Array.from({ length: machines }, (_, i) => new Machine(FIRST_MACHINE + i, pg!.url));
    if (machines)
      for (const [i, m] of [...OWNERS, ...WRITERS].entries()) this.placement.set(m, this.machines[i % machines]!);
  }

  static async open(project: string, store: 'file' | 'postgres', machines: number): Promise<Target> {
    const pg = store === 'postgres' ? await SoakPostgres.start() : null;
    const t = new Target(project, pg, machines);
    for (const m of t.machines) await m.up();
    return t;
  }

  /** A runtime of the harness, here (its own store: closed by `close`). */
  open(opts?: RuntimeOptions): Runtime {
    return new Runtime(this.pg ? new PgStore({ url: this.pg.url, key: SOAK_KEY }) : openStore(this.project), opts);
  }

  /** A runtime whose process tag names the machine of `member` (so a join records that machine). */
  openAs(member: string): Runtime {
    const m = this.placement.get(member);
    return this.open(m ? { tag: processTag(process.pid, m.id) } : undefined);
  }

  /** Starts a worker of `role` with these arguments, here or inside its machine. */
  spawner(bundle: string, role: string, env: NodeJS.ProcessEnv): (args: string[]) => ChildProcess {
    const stdio = ['pipe', 'pipe', 'pipe'] as const;
    const m = this.placement.get(role);
    if (!this.pg) return (args) => spawn(process.execPath, [bundle, ...args], { stdio: [...stdio], env });
    if (!m) {
      const target: PgTarget = { url: this.pg.url, key: SOAK_KEY };
      return (args) =>
        spawn(process.execPath, [bundle, ...args], {
          stdio: [...stdio],
          env: { ...env, [SOAK_PG]: JSON.stringify(target) },
        });
    }
    const local = LOCAL_PORT_BASE + MEMBERS.indexOf(role);
    const target: PgTarget = {
      url: `postgres://postgres@127.0.0.1:${local}/postgres`,
      key: SOAK_KEY,
      forward: { host: m.gateway, port: FORWARD_PORT },
    };
    return (args) =>
      m.spawn(process.execPath, [bundle, ...args], { ...env, [SOAK_PG]: JSON.stringify(target) }, [...stdio]);
  }

  async close(): Promise<void> {
    for (const m of this.machines) await m.down();
    this.pg?.stop();
  }
}
