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

/** What a change stores of one member's row: the whole row when it is new, else its queue length
 *  and whichever of seats and in-flight envelopes changed (the server keeps the other). A send
 *  changes a queue length only, and a member's seats (one per channel) are most of its row. */
export interface MailboxWrite {
  session_id: string;
  queued: number;
  seats?: Seat[];
  in_flight?: [string, string | null][];
}

export interface MailboxChange {
  upsert: MailboxWrite[];
  remove: string[];
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

const sameSeats = (a: readonly Seat[], b: readonly Seat[]) =>
  a.length === b.length &&
  a.every(
    (x, i) =>
      x.channel === b[i]!.channel &&
      x.host === b[i]!.host &&
      x.host_session_id === b[i]!.host_session_id &&
      x.stale === b[i]!.stale,
  );

const sameFlight = (a: readonly [string, string | null][], b: readonly [string, string | null][]) =>
  a.length === b.length && a.every((x, i) => x[0] === b[i]![0] && x[1] === b[i]![1]);

/** What to store for a row that was `was` and is `now` (null: nothing changed). */
function writeOf(was: MailboxRow | undefined, now: MailboxRow): MailboxWrite | null {
  if (!was) return now;
  const seats = was.seats === now.seats || sameSeats(was.seats, now.seats) ? undefined : now.seats;
  const flight = sameFlight(was.in_flight, now.in_flight) ? undefined : now.in_flight;
  if (!seats && !flight && was.queued === now.queued) return null;
  return {
    session_id: now.session_id,
    queued: now.queued,
    ...(seats ? { seats } : {}),
    ...(flight ? { in_flight: flight } : {}),
  };
}

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
      const row = this.rowOf(state, id, null);
      if (row) this.rows.set(id, row);
    }
  }

  /** The member's row, or null when it has no seat, no queue and nothing in flight; `seats` when
   *  the change left them as they were. */
  private rowOf(state: State, member: string, seats: Seat[] | null): MailboxRow | null {
    if (!seats) {
      seats = [];
      for (const [name, ch] of Object.entries(state.channels)) {
        if (ch.lifecycle !== 'active') continue;
        for (const mb of ch.members)
          if (mb.session_id === member)
            seats.push({ channel: name, host: mb.host, host_session_id: mb.host_session_id, stale: mb.stale === true });
      }
      seats.sort((a, b) => byString(a.channel, b.channel));
    }
    const in_flight: [string, string | null][] = [];
    for (const [id, to] of this.holder)
      if (to === member) in_flight.push([id, state.messages[id]?.in_flight_by ?? null]);
    in_flight.sort((a, b) => byString(a[0], b[0]));
    const queued = state.queues[member]?.length ?? 0;
    return seats.length || queued || in_flight.length ? { session_id: member, seats, queued, in_flight } : null;
  }

  /** After `ops` were applied to `state`: what to store of the rows that changed, with the mirror
   *  updated; `undo` puts the mirror back (a commit that lost to another process's). */
  apply(state: State, ops: readonly Op[]): MailboxChange & { undo: () => void } {
    const oldRows = new Map<string, MailboxRow | undefined>();
    const oldHolder = new Map<string, string | undefined>();
    const undo = () => {
      for (const [k, v] of oldRows) v ? this.rows.set(k, v) : this.rows.delete(k);
      for (const [k, v] of oldHolder) v === undefined ? this.holder.delete(k) : this.holder.set(k, v);
    };
    const touched = this.touched(state, ops, oldHolder);
    if (touched === 'all') {
      for (const [k, v] of this.rows) oldRows.set(k, v);
      for (const [k, v] of this.holder) if (!oldHolder.has(k)) oldHolder.set(k, v);
      this.rebuild(state);
      for (const k of this.holder.keys()) if (!oldHolder.has(k)) oldHolder.set(k, undefined);
      for (const k of this.rows.keys()) if (!oldRows.has(k)) oldRows.set(k, undefined);
    } else
      for (const [id, seatsToo] of touched) {
        const was = this.rows.get(id);
        oldRows.set(id, was);
        const row = this.rowOf(state, id, seatsToo || !was ? null : was.seats);
        if (row) this.rows.set(id, row);
        else this.rows.delete(id);
      }
    const upsert: MailboxWrite[] = [];
    const remove: string[] = [];
    for (const [id, was] of oldRows) {
      const now = this.rows.get(id);
      if (!now) {
        if (was) remove.push(id);
        continue;
      }
      const w = writeOf(was, now);
      if (w) upsert.push(w);
    }
    return { upsert, remove, undo };
  }

  /** The members whose row the ops may change, each with whether its seats may change too (the
   *  holder updated for envelopes written, its old entries kept in `oldHolder`), or 'all' when
   *  an op replaces a whole map. */
  private touched(
    state: State,
    ops: readonly Op[],
    oldHolder: Map<string, string | undefined>,
  ): Map<string, boolean> | 'all' {
    const members = new Map<string, boolean>();
    // A queue or an in-flight envelope changes the row; its seats stay unless a channel op says so.
    const touch = (id: string) => members.set(id, members.get(id) ?? false);
    for (const op of ops) {
      const [kind, path] = [op[0], op[1]];
      const [top, key, field] = path;
      if (top !== 'queues' && top !== 'messages' && top !== 'channels' && path.length > 0) continue;
      if (key === undefined) return 'all';
      if (top === 'queues') touch(key);
      else if (top === 'messages') {
        const had = this.holder.get(key);
        if (had !== undefined) touch(had);
        if (!oldHolder.has(key)) oldHolder.set(key, had);
        const e = kind === 'd' && path.length === 2 ? undefined : state.messages[key];
        if (e?.delivery_status === 'in_flight') {
          this.holder.set(key, e.recipient_session_id);
          touch(e.recipient_session_id);
        } else this.holder.delete(key);
      } else if (field === undefined || field === 'members' || field === 'lifecycle') {
        for (const mb of state.channels[key]?.members ?? []) members.set(mb.session_id, true);
        for (const row of this.rows.values())
          if (row.seats.some((s) => s.channel === key)) members.set(row.session_id, true);
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
