// The scale bench's processes (bench/scale.ts): where each runs (this computer, or a computer as a
// network namespace: test/netns/net.ts), and the CPU time of every process of a role, the exited ones
// included, from a cpuacct cgroup per role (cgroup v1, else v2's cpu.stat): each process is started
// by `sh`, which enters the role's group and execs it, so everything it starts later (the hook
// runner's detached commit among them) is counted with it. Root only.
import { type ChildProcess, type StdioOptions, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Machine } from '../test/netns/net.ts';

/** Where a process runs: this computer, or one of the bench's network namespaces. */
export interface Host {
  readonly name: string;
  /** `command args` as started on this host. */
  at(command: string, args: string[]): { command: string; args: string[] };
  /** What this host adds to a process's environment. */
  readonly env: Record<string, string>;
}

export const localHost: Host = { name: 'local', at: (command, args) => ({ command, args }), env: {} };

/** A computer of test/netns/net.ts: its processes run under `ip netns exec` with its computer id
 *  (as `Machine.spawn` starts them; `ip` execs the command, so the process keeps its pid). */
export function machineHost(m: Machine): Host {
  return {
    name: m.ns,
    at: (command, args) => ({ command: 'ip', args: ['netns', 'exec', m.ns, command, ...args] }),
    env: { OPENCOMMS_MACHINE_ID: m.id },
  };
}

/** Starts `command args` on `host`, in a role's group when `groups` is given: the group is entered
 *  first, outside the namespace (`ip netns exec` mounts a /sys of its own, without the cgroups). */
export function start(
  host: Host,
  command: string,
  args: string[],
  env: Record<string, string>,
  stdio: StdioOptions,
  group?: { cpu: CpuGroups; role: string },
): ChildProcess {
  const h = host.at(command, args);
  const w = group ? group.cpu.wrap(group.role, h.command, h.args) : h;
  return spawn(w.command, w.args, { env: { ...process.env, ...host.env, ...env }, stdio });
}

/** Linux's USER_HZ, what /proc/<pid>/stat counts CPU in. */
const CLOCK_TICKS = 100;

/** CPU time of a live process so far (user + system, ms), or 0 when it is gone. */
export function procCpuMs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) * (1000 / CLOCK_TICKS);
  } catch {
    return 0;
  }
}

export function rssMb(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round((Number(m[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}

const V1 = '/sys/fs/cgroup/cpuacct';
const V2 = '/sys/fs/cgroup';

/** One cgroup per role under a group of this run; `usageMs(role)` is its CPU so far. */
export class CpuGroups {
  private readonly base: string;
  private readonly v1: boolean;
  private readonly made = new Set<string>();

  private constructor(base: string, v1: boolean) {
    this.base = base;
    this.v1 = v1;
  }

  /** The groups, or why there are none (not root, no writable cpuacct or cgroup v2). */
  static open(): CpuGroups | string {
    if (process.getuid?.() !== 0) return 'not root: the CPU of exited processes is counted by cgroups, which need root';
    const name = `ocbench-scale-${process.pid}`;
    const tryAt = (root: string, v1: boolean) => {
      try {
        const g = new CpuGroups(join(root, name), v1);
        mkdirSync(g.base, { recursive: true });
        g.usageMs('probe');
        return g;
      } catch {
        return null;
      }
    };
    const g =
      (existsSync(join(V1, 'cpuacct.usage')) ? tryAt(V1, true) : null) ??
      (existsSync(join(V2, 'cgroup.controllers')) ? tryAt(V2, false) : null);
    return g ?? 'no writable cgroup (cpuacct of cgroup v1, or cgroup v2) to count the CPU of exited processes';
  }

  private dir(role: string) {
    const d = join(this.base, role);
    if (!this.made.has(role)) {
      mkdirSync(d, { recursive: true });
      this.made.add(role);
    }
    return d;
  }

  procsFile(role: string) {
    return join(this.dir(role), 'cgroup.procs');
  }

  /** `command args` started by `sh`, which first enters the role's group. */
  wrap(role: string, command: string, args: string[]): { command: string; args: string[] } {
    return { command: 'sh', args: ['-c', `echo $$ > ${this.procsFile(role)} && exec "$@"`, 'sh', command, ...args] };
  }

  usageMs(role: string): number {
    const d = this.dir(role);
    if (this.v1) return Number(readFileSync(join(d, 'cpuacct.usage'), 'utf8')) / 1e6;
    const m = /usage_usec (\d+)/.exec(readFileSync(join(d, 'cpu.stat'), 'utf8'));
    return Number(m?.[1] ?? 0) / 1000;
  }

  pids(role: string): number[] {
    try {
      return readFileSync(this.procsFile(role), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  /** Moves a process (not started by the bench: the database's) into a role's group. */
  move(pid: number, role: string) {
    try {
      writeFileSync(this.procsFile(role), String(pid));
    } catch {
      // gone meanwhile
    }
  }

  /** Moves one process back to the root group. */
  toRoot(pid: number) {
    try {
      writeFileSync(join(this.v1 ? V1 : V2, 'cgroup.procs'), String(pid));
    } catch {
      // gone meanwhile
    }
  }

  /** Moves the processes of a role back to the root group (the database's, at the end). */
  release(role: string) {
    for (const pid of this.pids(role)) this.toRoot(pid);
  }

  /** SIGKILLs the processes of a role: every one of them the bench started. */
  kill(role: string) {
    for (const pid of this.pids(role)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
  }

  /** On an interrupted run: the database's processes back to the root group, every process the
   *  bench started killed, the groups removed. */
  abandon() {
    this.release('db');
    const roles = [...this.made].filter((r) => r !== 'db');
    for (const role of roles) this.kill(role);
    // Until the killed processes have left their groups (a second at most), sleeping synchronously:
    // the process exits right after.
    const pause = new Int32Array(new SharedArrayBuffer(4));
    for (let i = 0; i < 50 && roles.some((r) => this.pids(r).length); i++) Atomics.wait(pause, 0, 0, 20);
    this.remove();
  }

  /** Removes the groups (their processes must be gone or released). */
  remove() {
    for (const role of this.made) {
      try {
        rmdirSync(join(this.base, role));
      } catch {
        // a process still in it: left for the system to report
      }
    }
    try {
      for (const d of readdirSync(this.base, { withFileTypes: true }))
        if (d.isDirectory()) rmdirSync(join(this.base, d.name));
      rmdirSync(this.base);
    } catch {
      // as above
    }
  }
}
