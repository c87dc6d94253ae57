// Whether a process of this machine is still there, by its PID: the one rule behind the lock's
// token sweep and the liveness of process tags (runtime/process.ts).

/** A process of this machine is alive if signal 0 reaches it (EPERM: alive, another user's). */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
