// The machine: which computer a process runs on, as a stable id of its own, not its hostname
// (containers share hostnames, and a host label is another idea). Two processes with the same
// machine id can check each other's PID; a process on another machine is alive only while its
// lease in the store holds (lease.ts). The id comes from the operating system's own machine id
// (`/etc/machine-id`), which every user and HOME of one machine share and a container has its own
// of, as it has its own PIDs; only where the system keeps none is a UUID minted into the user's
// config directory.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { crypto } from '../lazy-crypto.ts';

/** Overrides the machine id (tests, and a machine whose config directory is not kept). */
export const MACHINE_ID_ENV = 'OPENCOMMS_MACHINE_ID';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether a string is a machine id as this module mints them. */
export const isMachineId = (s: string) => UUID_RE.test(s);

/** Where the id is kept: `$XDG_CONFIG_HOME/opencomms/machine-id`, else `~/.config/opencomms/machine-id`. */
export function machineIdFile(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME?.startsWith('/') ? env.XDG_CONFIG_HOME : join(env.HOME || homedir(), '.config');
  return join(base, 'opencomms', 'machine-id');
}

/** Where the operating system keeps its machine id (systemd's file, then D-Bus's). */
export const OS_MACHINE_ID_FILES = ['/etc/machine-id', '/var/lib/dbus/machine-id'];

/** This machine's id: the override, else one derived from the operating system's machine id,
 *  else the kept one, else a new one kept for next time (two processes minting at once agree: the
 *  first file written wins, `wx` refuses the second). A config directory that cannot be written
 *  gives an id derived from the hostname, stable for every process of the machine, so PID
 *  liveness still applies among them. */
export function loadMachineId(
  env: NodeJS.ProcessEnv = process.env,
  osFiles: readonly string[] = OS_MACHINE_ID_FILES,
): string {
  const forced = env[MACHINE_ID_ENV]?.trim().toLowerCase();
  if (forced && isMachineId(forced)) return forced;
  const os = fromOs(osFiles);
  if (os) return os;
  const file = machineIdFile(env);
  const kept = readKept(file);
  if (kept) return kept;
  try {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, `${crypto().randomUUID()}\n`, { flag: 'wx', mode: 0o600 });
  } catch {
    // written by another process meanwhile, or not writable: read again, else derive
  }
  return readKept(file) ?? hostDerived();
}

function readKept(file: string): string | null {
  try {
    const s = readFileSync(file, 'utf8').trim().toLowerCase();
    return isMachineId(s) ? s : null;
  } catch {
    return null;
  }
}

/** An application-specific id from the system's (systemd asks applications not to expose the
 *  machine id itself, and to key a hash with it instead). */
function fromOs(files: readonly string[]): string | null {
  for (const f of files) {
    let id: string;
    try {
      id = readFileSync(f, 'utf8').trim();
    } catch {
      continue;
    }
    if (!/^[0-9a-f]{32}$/.test(id)) continue;
    return uuidShape(crypto().createHmac('sha256', id).update('opencomms machine').digest('hex'));
  }
  return null;
}

const uuidShape = (hex: string) =>
  `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;

/** A UUID-shaped id from the hostname (the fallback above): the same on every call. */
function hostDerived(): string {
  const hex = Buffer.from(hostname().padEnd(16, '.')).toString('hex').padEnd(32, '0').slice(0, 32);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

let loaded: string | undefined;
/** This process's machine, read once, when first asked (not on import: deriving it takes crypto,
 *  see lazy-crypto.ts). */
export const machineId = (): string => (loaded ??= loadMachineId());
