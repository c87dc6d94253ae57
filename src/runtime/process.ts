// Process tags (`"<pid>@<hostname>"`): who holds an in-flight batch or owns a session, and whether
// that process is still there.
import { hostname } from 'node:os';

export const processTag = (pid: number = process.pid) => `${pid}@${hostname()}`;

export const PROCESS_TAG = processTag();

/** A process is alive if it is on this host and signal 0 reaches it; another host's process
 *  cannot be checked, so it is assumed alive (its mail is never stolen). */
export function processAlive(tag: string): boolean {
  const at = tag.lastIndexOf('@');
  const pid = Number(tag.slice(0, at));
  if (tag.slice(at + 1) !== hostname()) return true;
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
