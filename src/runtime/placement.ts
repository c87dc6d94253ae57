// Where each member's session and each long-lived process runs, and whether that process's lease
// holds: what `status`, `members`, the console and `watch` show beside them (computers.md). Pure:
// built from the state, one lease snapshot of the store (null for a store without leases, which
// one computer uses) and this process's computer. A hostname comes from a process tag, which any
// process of the project writes: only a plain hostname is shown, anything else is left out.
import type { Member, State } from '../protocol/schema.ts';
import type { ToolResult } from '../protocol/result.ts';
import type { LeaseView, Store } from '../store/types.ts';
import { parseTag } from './process.ts';

/** `holds`: its lease has not expired; `expired`: expired, or gone with no row (a clean exit
 *  ends it); `n/a`: no lease to judge (no owning process, a store without leases, or a tag
 *  written before computer ids). */
export type LeaseState = 'holds' | 'expired' | 'n/a';

export interface MemberPlace {
  /** The computer hosting the session; null when recorded before computers had ids. */
  machine: string | null;
  /** That computer's hostname as one of its processes gave it in its tag, when known. */
  machine_name: string | null;
  this_machine: boolean;
  /** The process tag owning the session (a push session's host process), or null. */
  process: string | null;
  lease: LeaseState;
}

export interface ProcessPlace {
  process: string;
  pid: number;
  machine: string | null;
  machine_name: string | null;
  this_machine: boolean;
  lease: Exclude<LeaseState, 'n/a'>;
  /** Until the lease expires (negative: expired that long ago), on the store's clock. */
  expires_in_ms: number;
}

/** Characters of a computer id in a terminal: enough to tell a project's computers apart. */
export const MACHINE_ID_SHOWN = 8;

const HOSTNAME_RE = /^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/;

/** A hostname that is safe anywhere (letters, digits, dots, hyphens), else null. */
const plainHostname = (h: string) => (HOSTNAME_RE.test(h) ? h : null);

/** Hostnames by computer id, from the tags of the owners and of the lease rows. */
function namesOf(state: Readonly<State>, view: LeaseView | null): Map<string, string> {
  const names = new Map<string, string>();
  const tags = [...(view?.left.keys() ?? [])];
  for (const ch of Object.values(state.channels)) for (const m of ch.members) if (m.owner) tags.push(m.owner);
  for (const tag of tags) {
    const t = parseTag(tag);
    const name = plainHostname(t.hostname);
    if (t.machine && name && !names.has(t.machine)) names.set(t.machine, name);
  }
  return names;
}

function leaseOf(tag: string | null, view: LeaseView | null): LeaseState {
  if (!tag || !view || parseTag(tag).machine === null) return 'n/a';
  return view.live.has(tag) ? 'holds' : 'expired';
}

export interface Placement {
  /** This process's computer. */
  machine: string;
  member(m: Pick<Member, 'machine' | 'owner'>): MemberPlace;
  /** The place of a channel's member by ids; null when it is not (or no longer) in the state. */
  memberIn(channelId: string, sid: string): MemberPlace | null;
  /** Every process with a lease row, by computer then PID; null for a store without leases. */
  processes(): ProcessPlace[] | null;
}

export function placement(state: Readonly<State>, view: LeaseView | null, machine: string): Placement {
  const names = namesOf(state, view);
  const name = (id: string | null) => (id ? (names.get(id) ?? null) : null);
  return {
    machine,
    member: (m) => ({
      machine: m.machine,
      machine_name: name(m.machine),
      this_machine: m.machine === null || m.machine === machine,
      process: m.owner,
      lease: leaseOf(m.owner, view),
    }),
    memberIn(channelId, sid) {
      const ch = Object.values(state.channels).find((c) => c.id === channelId);
      const m = ch?.members.find((x) => x.session_id === sid);
      return m ? this.member(m) : null;
    },
    processes: () =>
      view
        ? [...view.left.entries()]
            .map(([tag, left]) => {
              const t = parseTag(tag);
              return {
                process: tag,
                pid: t.pid,
                machine: t.machine,
                machine_name: name(t.machine),
                this_machine: t.machine === machine,
                lease: view.live.has(tag) ? ('holds' as const) : ('expired' as const),
                expires_in_ms: Math.round(left),
              };
            })
            .sort((a, b) => (a.machine ?? '').localeCompare(b.machine ?? '') || a.pid - b.pid)
        : null,
  };
}

/** The placement as the store has it now: the state and one lease snapshot (one query; a
 *  snapshot that cannot be taken is shown as no leases, never as a refusal of the read). */
export async function placeNow(store: Store, machine: string): Promise<Placement> {
  const state = await store.peek();
  const view = store.leases ? await store.leases.snapshot().catch(() => null) : null;
  return placement(state, view, machine);
}

type Row = { session_id: string };

/** A report's member rows with their places (a member that left meanwhile keeps its row as is). */
export const placeRows = <M extends Row>(p: Placement, channelId: string, rows: readonly M[]) =>
  rows.map((m) => ({ ...m, ...p.memberIn(channelId, m.session_id) }));

/** `operator_status` with the computer of each member and this process's, and every process. */
export function placeStatus(p: Placement, r: ToolResult): ToolResult {
  if (!r.ok) return r;
  const d = r.data as { channels: Array<{ channel_id: string; members: Row[] }> };
  const channels = d.channels.map((c) => ({ ...c, members: placeRows(p, c.channel_id, c.members) }));
  return { ...r, data: { ...d, channels, machine: p.machine, processes: p.processes() } };
}

/** `session_get` of a live channel with the computer of each agent and this process's. */
export function placeSession(p: Placement, r: ToolResult): ToolResult {
  if (!r.ok) return r;
  const d = r.data as { kind: string; channel_id?: string; agents: Row[] };
  if (d.kind !== 'live' || !d.channel_id) return r;
  return { ...r, data: { ...d, agents: placeRows(p, d.channel_id, d.agents), machine: p.machine } };
}

/** A read's answer with places, taken after it (a refusal is answered as it is). */
export async function placed(
  store: Store,
  machine: string,
  r: ToolResult,
  place: (p: Placement, r: ToolResult) => ToolResult,
): Promise<ToolResult> {
  return r.ok ? place(await placeNow(store, machine), r) : r;
}

/** A computer in a terminal: `1a2b3c4d (build-box)`; only a plain hostname is ever in it. */
export const machineLabel = (machine: string | null, name: string | null) =>
  machine ? `${machine.slice(0, MACHINE_ID_SHOWN)}${name ? ` (${name})` : ''}` : 'unknown';

/** One member's place in a terminal line: `computer 1a2b3c4d (build-box), lease holds`. */
export const renderPlace = (p: MemberPlace) =>
  `computer ${machineLabel(p.machine, p.machine_name)}${p.this_machine ? ', this computer' : ''}, lease ${p.lease}`;
