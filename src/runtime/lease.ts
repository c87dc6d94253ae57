// A long-lived process's lease, and the sweep of processes whose lease expired. The process
// renews its lease LEASE_RENEWALS_PER_LEASE times per lease; each renewal also answers everyone's
// leases (one query). When the state names a process of another computer (an in-flight holder, a
// session owner) whose lease has expired, this process runs the sweep with the liveness that
// snapshot gives; when such a holder's lease is about to expire, a timer checks again just after.
import type { LeaseStore, LeaseView } from '../store/types.ts';
import type { State } from '../protocol/schema.ts';
import { LEASE_EXPIRY_SLACK_MS, LEASE_MAX_MS, LEASE_MIN_MS, LEASE_MS, LEASE_RENEWALS_PER_LEASE } from './limits.ts';
import { livenessFrom, onThisMachine } from './process.ts';

/** The lease length: OPENCOMMS_LEASE_MS when it is a whole number of ms within the bounds. */
export function leaseMs(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.OPENCOMMS_LEASE_MS);
  return Number.isInteger(n) && n >= LEASE_MIN_MS && n <= LEASE_MAX_MS ? n : LEASE_MS;
}

/** Tags of other computers that the state says hold something: in-flight mail or a session. */
export function remoteHolders(state: Readonly<State>, machine: string): Set<string> {
  const out = new Set<string>();
  for (const e of Object.values(state.messages))
    if (e.delivery_status === 'in_flight' && e.in_flight_by && !onThisMachine(e.in_flight_by, machine))
      out.add(e.in_flight_by);
  for (const ch of Object.values(state.channels)) {
    if (ch.lifecycle !== 'active') continue;
    for (const m of ch.members) if (m.owner && !onThisMachine(m.owner, machine)) out.add(m.owner);
  }
  return out;
}

export interface LeaseHost {
  peek(): Promise<Readonly<State>>;
  /** Runs the sweep with this liveness (one mutation). */
  sweep(alive: (tag: string) => boolean): Promise<void>;
  log(line: string): void;
}

export class LeaseKeeper {
  private view: LeaseView | null = null;
  private renewal: NodeJS.Timeout | null = null;
  private expiry: NodeJS.Timeout | null = null;
  private closed = false;
  readonly ms: number;

  constructor(
    private readonly store: LeaseStore,
    readonly tag: string,
    readonly machine: string,
    private readonly host: LeaseHost,
    ms = leaseMs(),
  ) {
    this.ms = ms;
  }

  /** The liveness the engine takes: PIDs on this computer, the last lease snapshot for others
   *  (before any snapshot answered, others are assumed alive: nothing is swept on no evidence). */
  alive(): (tag: string) => boolean {
    return livenessFrom(this.view, this.machine);
  }

  /** The last snapshot (null before the first renewal answered). */
  get snapshot(): LeaseView | null {
    return this.view;
  }

  /** Takes the lease (before this process drains or claims anything), then renews it. A store
   *  that cannot be reached now is not fatal: the renewals keep trying, as every call does. */
  async start(): Promise<void> {
    await this.renew();
    this.renewal = setInterval(() => void this.renew(), Math.floor(this.ms / LEASE_RENEWALS_PER_LEASE));
    this.renewal.unref?.();
  }

  private async renew() {
    try {
      this.view = await this.store.renew(this.tag, this.machine, this.ms);
    } catch (e) {
      // Unreachable store: the lease may lapse, and others may sweep; fencing refuses what this
      // process then answers late. The next renewal tries again.
      this.host.log(`lease renewal failed: ${(e as Error).message}`);
      return;
    }
    await this.check();
  }

  /** Sweeps when a holder of another computer has lost its lease; arms a check for the earliest
   *  expiry of one that still holds. */
  async check(): Promise<void> {
    if (this.closed || !this.view) return;
    let state: Readonly<State>;
    try {
      state = await this.host.peek();
    } catch (e) {
      // Called from timers and start-up: a store down now is logged, never a rejection that ends
      // the process; the next renewal checks again.
      this.host.log(`lease check failed: ${(e as Error).message}`);
      return;
    }
    const holders = remoteHolders(state, this.machine);
    if (!holders.size) return;
    const view = this.view;
    if ([...holders].some((t) => !view.live.has(t))) await this.host.sweep(livenessFrom(view, this.machine));
    let soonest = Infinity;
    for (const t of holders) if (view.live.has(t)) soonest = Math.min(soonest, view.left.get(t) ?? Infinity);
    if (soonest === Infinity) return;
    if (this.expiry) clearTimeout(this.expiry);
    this.expiry = setTimeout(() => {
      this.expiry = null;
      void this.recheck();
    }, soonest + LEASE_EXPIRY_SLACK_MS);
    this.expiry.unref?.();
  }

  private async recheck() {
    try {
      this.view = await this.store.snapshot();
    } catch (e) {
      this.host.log(`lease check failed: ${(e as Error).message}`);
      return;
    }
    await this.check();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.renewal) clearInterval(this.renewal);
    if (this.expiry) clearTimeout(this.expiry);
    await this.store.release(this.tag).catch(() => {});
  }
}
