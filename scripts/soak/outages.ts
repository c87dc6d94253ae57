// A whole machine lost while the soak runs (`--machines N`): killed (every process SIGKILLed, its
// namespace deleted, then rebuilt and its processes started again) or partitioned (its veth link
// down for longer than the lease, then up). Each outage measures what the lease promises: the
// time from the last renewal of each process that held mail in flight on that machine until a
// sweep put that mail back in its queue (docs/computers.md: at most lease + 2 s).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Envelope, State } from '../../src/protocol/schema.ts';
import { parseTag } from '../../src/runtime/process.ts';
import type { PgStore } from '../../src/store/postgres/store.ts';
import type { Machine } from '../../test/netns/net.ts';
import type { Managed } from './managed.ts';
import type { Outage } from './records.ts';

export type OutageKind = 'kill' | 'partition';

/** How long a machine stays out past the lease: a killed machine longer than a partition, so the
 *  sweep (by the other machines' processes, not the machine's own restart) is what is measured. */
const OUT_PAST_LEASE_MS = { kill: 3_000, partition: 1_500 } as const;
/** How long to wait for a hand-over on the machine before cutting it anyway. */
const HELD_WAIT_MS = 8_000;

const heldOn = (s: Readonly<State>, machine: string): Envelope[] =>
  Object.values(s.messages).filter(
    (e) => e.delivery_status === 'in_flight' && e.in_flight_by && parseTag(e.in_flight_by).machine === machine,
  );

/** The first sweep of `e` back to its queue at or after `since` (its receipt's time). */
const sweptAt = (e: Envelope, since: number): number | null =>
  e.transitions.find(([ev, , at]) => ev === 'SWEEP' && at >= since)?.[2] ?? null;

/** `handedOver`: how much the computer's owners have recorded as shown to their hosts (null: it
 *  runs no owner). It grows when a driver starts a hand-over, before the host accepts it: the
 *  batch is in flight then, and the cut follows at once. */
export async function outage(
  kind: OutageKind,
  m: Machine,
  procs: Managed[],
  view: PgStore,
  leaseMs: number,
  handedOver: (() => number) | null,
): Promise<Outage> {
  if (handedOver) {
    const before = handedOver();
    const waitUntil = Date.now() + HELD_WAIT_MS;
    while (Date.now() < waitUntil && handedOver() === before) await sleep(5);
  }
  const from = Date.now();
  if (kind === 'kill') {
    for (const p of procs) p.expectKill();
    await m.down();
    // A process still being started when the namespace went may have escaped the namespace's kill.
    for (const p of procs) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.killedWithMachine()));
  } else m.partition(true);
  const held = heldOn(await view.peek(), m.id);
  const leases = await view.leases.snapshot();
  const lastRenewal = new Map<string, number>();
  for (const e of held) {
    const left = leases.left.get(e.in_flight_by!);
    lastRenewal.set(e.message_id, left === undefined ? from : Date.now() + left - leaseMs);
  }
  const swept = new Map<string, number>();
  const back = from + leaseMs + OUT_PAST_LEASE_MS[kind];
  while (Date.now() < back) {
    const s = await view.peek();
    for (const e of held) {
      const now = s.messages[e.message_id];
      const at = now ? sweptAt(now, lastRenewal.get(e.message_id)!) : null;
      if (at !== null && !swept.has(e.message_id)) swept.set(e.message_id, at);
    }
    await sleep(50);
  }
  const to = Date.now();
  if (kind === 'kill') {
    await m.up();
    for (const p of procs) p.start();
    await Promise.all(procs.map((p) => p.line('ready', 60_000)));
  } else m.partition(false);
  const delays = held.map((e) =>
    swept.has(e.message_id) ? swept.get(e.message_id)! - lastRenewal.get(e.message_id)! : null,
  );
  return {
    machine: m.n,
    kind,
    names: procs.map((p) => p.name),
    from,
    to,
    held: held.length,
    unswept: delays.filter((d) => d === null).length,
    sweep_ms: delays.filter((d): d is number => d !== null),
  };
}
