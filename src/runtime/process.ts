// Process tags (`"<pid>@<hostname>/<machine id>"`): who holds an in-flight batch or owns a
// session, on which computer, and whether that process is still there. A tag written before
// computers had ids (`"<pid>@<hostname>"`) is judged as then: by PID when the hostname is this
// one's, else assumed alive.
import { hostname } from 'node:os';
import { pidAlive } from '../store/pid.ts';
import { isMachineId, machineId } from './machine.ts';

/** A process's tag; this process's by default. */
export const processTag = (pid: number = process.pid, machine: string = machineId()) =>
  `${pid}@${hostname()}/${machine}`;

export interface ParsedTag {
  pid: number;
  hostname: string;
  /** Null for a tag written before computers had ids. */
  machine: string | null;
}

export function parseTag(tag: string): ParsedTag {
  const at = tag.indexOf('@');
  const rest = tag.slice(at + 1);
  const slash = rest.lastIndexOf('/');
  const machine = slash >= 0 && isMachineId(rest.slice(slash + 1)) ? rest.slice(slash + 1) : null;
  return { pid: Number(tag.slice(0, at)), hostname: machine ? rest.slice(0, slash) : rest, machine };
}

/** Whether the tag's process runs on this computer (a tag without a computer id: by hostname). */
export function onThisMachine(tag: string, machine: string = machineId()): boolean {
  const t = parseTag(tag);
  return t.machine === null ? t.hostname === hostname() : t.machine === machine;
}

/** Which processes of other computers hold a lease now, on the store's clock (lease.ts). */
export interface LeaseSnapshot {
  /** Tags whose lease has not expired. */
  live: ReadonlySet<string>;
}

/** Liveness as the engine takes it (synchronous): a process of this computer by its PID; one of
 *  another computer by the lease snapshot, or, with no snapshot (the file store, which only one
 *  computer uses), assumed alive so its mail is never stolen. `machine`: this process's unless
 *  given, read at the first check rather than on import (machine.ts). */
export function livenessFrom(leases: LeaseSnapshot | null, machine?: string): (tag: string) => boolean {
  return (tag) => {
    const t = parseTag(tag);
    if (t.machine === null) return t.hostname === hostname() ? pidAlive(t.pid) : true;
    if (t.machine === (machine ?? machineId())) return pidAlive(t.pid);
    return leases ? leases.live.has(tag) : true;
  };
}

/** Liveness without leases: PIDs of this computer; other computers assumed alive. */
export const processAlive = livenessFrom(null);
