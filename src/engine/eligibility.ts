// Who may be continued by a host CLI (the eligibility gate, hosts.md "spawn_push") and, from that, how long a
// member's mail may wait before it ages out (protocol.md "Delivery modes"). Host-neutral: the shell says which host labels
// it can continue (`Env.spawnHosts`); the engine only compares labels.
import type { Member } from '../protocol/schema.ts';

/** The spawn gate: mode spawn_push, effective `resume` and `push`, a bound host session, and a
 *  host the shell has an argv contract for. */
export const spawnEligible = (m: Member, spawnHosts: readonly string[] = []): boolean =>
  m.delivery_mode === 'spawn_push' &&
  m.endpoint_capabilities.resume &&
  m.endpoint_capabilities.push &&
  m.host_session_id !== null &&
  spawnHosts.includes(m.host);

/** The stale window in force for this member's mail now: a spawn_push member that fails the gate
 *  is read by `opencomms_pull` instead, so its mail waits like a pull member's (none). */
export const staleWindow = (m: Member, spawnHosts?: readonly string[]): number | null =>
  m.delivery_mode === 'spawn_push' && !spawnEligible(m, spawnHosts) ? null : m.stale_policy.window_ms;
