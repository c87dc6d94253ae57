// The mailbox summary: per member, what the hook runner's triage reads of the state (its seats in
// active channels with host, host session and staleness; how many envelopes wait in its queue; the
// envelopes in flight to it and who holds them). The writer of each change computes the rows that
// change from the state it commits on, and the same transaction stores them (schema.ts `commit`),
// so the table always equals the summary of the state at the head: the empty-queue hook reads
// those rows instead of loading the state. Node built-ins only: the hook runner imports `rawState`.
import type { Op } from '../../protocol/draft.ts';
import type { State } from '../../protocol/schema.ts';

export interface Seat {
  channel: string;
  host: string;
  host_session_id: string | null;
  stale: boolean;
}

export interface MailboxRow {
  session_id: string;
  seats: Seat[];
  queued: number;
  /** [message id, in_flight_by] of every envelope in flight to this member, by id. */
  in_flight: [string, string | null][];
}

export interface MailboxChange {
  upsert: MailboxRow[];
  remove: string[];
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export class Mailbox {
  /** The rows as stored at the state this object follows. */
  readonly rows = new Map<string, MailboxRow>();
  /** Every envelope in flight → its recipient (how a deleted envelope's member is found). */
  private readonly holder = new Map<string, string>();

  /** The summary of a whole state. */
  static of(state: State): Mailbox {
    const m = new Mailbox();
    m.rebuild(state);
    return m;
  }

  private rebuild(state: State) {
    this.holder.clear();
    for (const [id, e] of Object.entries(state.messages))
      if (e.delivery_status === 'in_flight') this.holder.set(id, e.recipient_session_id);
    const members = new Set<string>([...Object.keys(state.queues), ...this.holder.values()]);
    for (const ch of Object.values(state.channels)) for (const mb of ch.members) members.add(mb.session_id);
    this.rows.clear();
    for (const id of members) {
      const row = this.rowOf(state, id);
      if (row) this.rows.set(id, row);
    }
  }

  /** The member's row, or null when it has no seat, no queue and nothing in flight. */
  private rowOf(state: State, member: string): MailboxRow | null {
    const seats: Seat[] = [];
    for (const [name, ch] of Object.entries(state.channels)) {
      if (ch.lifecycle !== 'active') continue;
      for (const mb of ch.members)
        if (mb.session_id === member)
          seats.push({ channel: name, host: mb.host, host_session_id: mb.host_session_id, stale: mb.stale === true });
    }
    const in_flight: [string, string | null][] = [];
    for (const [id, to] of this.holder)
      if (to === member) in_flight.push([id, state.messages[id]?.in_flight_by ?? null]);
    in_flight.sort((a, b) => byString(a[0], b[0]));
    seats.sort((a, b) => byString(a.channel, b.channel));
    const queued = state.queues[member]?.length ?? 0;
    return seats.length || queued || in_flight.length ? { session_id: member, seats, queued, in_flight } : null;
  }

  /** After `ops` were applied to `state`: the rows that changed, with the mirror updated; `undo`
   *  puts the mirror back (a commit that lost to another process's). */
  apply(state: State, ops: readonly Op[]): MailboxChange & { undo: () => void } {
    const oldRows = new Map(this.rows);
    const oldHolder = new Map(this.holder);
    const undo = () => {
      this.rows.clear();
      for (const [k, v] of oldRows) this.rows.set(k, v);
      this.holder.clear();
      for (const [k, v] of oldHolder) this.holder.set(k, v);
    };
    const touched = this.touched(state, ops);
    if (touched === 'all') this.rebuild(state);
    else
      for (const id of touched) {
        const row = this.rowOf(state, id);
        if (row) this.rows.set(id, row);
        else this.rows.delete(id);
      }
    const upsert: MailboxRow[] = [];
    const remove: string[] = [];
    for (const id of touched === 'all' ? new Set([...oldRows.keys(), ...this.rows.keys()]) : touched) {
      const now = this.rows.get(id);
      const was = oldRows.get(id);
      if (!now) {
        if (was) remove.push(id);
      } else if (!was || JSON.stringify(was) !== JSON.stringify(now)) upsert.push(now);
    }
    return { upsert, remove, undo };
  }

  /** The members whose row the ops may change (the holder updated for envelopes written), or
   *  'all' when an op replaces a whole map. */
  private touched(state: State, ops: readonly Op[]): Set<string> | 'all' {
    const members = new Set<string>();
    for (const op of ops) {
      const [kind, path] = [op[0], op[1]];
      const [top, key, field] = path;
      if (top !== 'queues' && top !== 'messages' && top !== 'channels' && path.length > 0) continue;
      if (key === undefined) return 'all';
      if (top === 'queues') members.add(key);
      else if (top === 'messages') {
        const had = this.holder.get(key);
        if (had !== undefined) members.add(had);
        const e = kind === 'd' && path.length === 2 ? undefined : state.messages[key];
        if (e?.delivery_status === 'in_flight') {
          this.holder.set(key, e.recipient_session_id);
          members.add(e.recipient_session_id);
        } else this.holder.delete(key);
      } else if (field === undefined || field === 'members' || field === 'lifecycle') {
        for (const mb of state.channels[key]?.members ?? []) members.add(mb.session_id);
        for (const row of this.rows.values()) if (row.seats.some((s) => s.channel === key)) members.add(row.session_id);
      }
    }
    return members;
  }
}

/** The rows as the part of a state the hook runner's triage reads (its fast path, a glance):
 *  a channel per seat, a queue of the right length, the envelopes in flight. */
export function rawState(rows: readonly MailboxRow[]): Record<string, unknown> {
  const channels: Record<string, { lifecycle: string; members: unknown[] }> = {};
  const queues: Record<string, unknown[]> = {};
  const messages: Record<string, unknown> = {};
  for (const r of rows) {
    for (const s of r.seats) {
      const ch = (channels[s.channel] ??= { lifecycle: 'active', members: [] });
      ch.members.push({ session_id: r.session_id, host: s.host, host_session_id: s.host_session_id, stale: s.stale });
    }
    if (r.queued) queues[r.session_id] = new Array(r.queued).fill('');
    for (const [id, by] of r.in_flight)
      messages[id] = { delivery_status: 'in_flight', recipient_session_id: r.session_id, in_flight_by: by };
  }
  return { channels, queues, messages };
}
