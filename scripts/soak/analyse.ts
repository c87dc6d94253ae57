// The soak's verdict, computed from evidence only: the store's final envelopes (live state and
// history logs, read through the Store API), what the writers recorded, what the owners' drivers
// recorded, and when each process lived and died. Pure, so a test can feed it a crafted run and
// watch each figure catch its defect.
//
// Counting rules (docs/reliability.md explains them):
// - accepted: every envelope the store holds with a soak origin, plus every id a writer recorded
//   as accepted. A send the store holds but the writer never recorded is `accepted_unrecorded`
//   when it was its incarnation's last action and that incarnation was killed (the kill fell
//   between the store's answer and the record); anything else is a `record_mismatch`.
// - delivered: a push envelope with at least one prompt record; a pull envelope in a pull record,
//   or delivered by the store to a writer killed before it could record that pull (its
//   incarnation's last action: `pull_unrecorded`, the documented at-most-once window of a read).
// - lost: accepted, not delivered as above, and not still pending.
// - duplicate prompts: every prompt of an id after its first. Inside the crash window when the
//   previous prompt's owner incarnation was killed between the two prompts and the store never
//   committed the earlier hand-over (no COMMIT before the last DRAIN in the envelope's receipts).
//   With leases (PostgreSQL), a repeat is also inside the window when the store fenced the earlier
//   hand-over: its owner incarnation's commit of that envelope was refused as `hold_lost`, because
//   its lease had lapsed (a partition, a stall) and the mail was swept and handed over again
//   (docs/computers.md, the at-least-once window).
// - FIFO, per sender → recipient → channel: the first hand-over of each message follows send
//   order with no message overtaking an earlier one, and within one prompt a stream's messages
//   are in send order. A crash re-delivers a batch it may have handed over already (repeats are
//   counted as duplicates above), never a newer message before an older one.
import { MESSAGE_ID_RE } from '../../src/protocol/ids.ts';
import type { Envelope } from '../../src/protocol/schema.ts';
import { parseToken, sendOrder, type Origin } from './plan.ts';
import type { CheckRecord, Incarnation, Outage, PromptRecord, WriterRecord } from './records.ts';

export interface Evidence {
  /** Final envelopes: live state wins over the history log for an id in both. */
  envelopes: Envelope[];
  writers: Record<string, WriterRecord[]>;
  owners: Record<string, PromptRecord[]>;
  incarnations: Incarnation[];
  checks: CheckRecord[];
  kills: number;
  /** In-flight envelopes the final sweep found (every process had stopped) and any left after it. */
  inFlightAtEnd: number;
  /** Whole computers killed or partitioned (`--machines`). */
  outages?: Outage[];
  /** `hold_lost` errors of the final state (the checker records those it saw during the run). */
  fenced?: Array<{ at: number; message: string }>;
}

export interface Report {
  kills: number;
  crashes: number;
  accepted_sends: number;
  accepted_unrecorded: number;
  accepted_envelopes: number;
  refused_sends: Record<string, number>;
  delivered: { push: number; pull: number; pull_unrecorded: number };
  swept_envelopes: number;
  lost: number;
  still_pending: number;
  state_reads: number;
  state_parse_failures: number;
  /** Reads the store refused with a stable reason while its server restarted, by reason. */
  state_reads_refused: Record<string, number>;
  /** Late commits the store refused and recorded as `hold_lost` (fencing). */
  fenced_commits: number;
  /** Of those, how many no machine outage was under way for: a lease that lapsed while its
   *  process lived (a stall longer than the lease). */
  fenced_commits_outside_outages: number;
  fifo_violations: number;
  duplicate_prompts: { inside_crash_window: number; outside_crash_window: number };
  record_mismatches: number;
  misrouted: number;
  unframed_prompts: number;
  stuck_in_flight: number;
  /** A few examples of each failing figure, for the person reading a red run. */
  examples: Record<string, string[]>;
}

/** Figures that must be zero for the run to pass. */
export const MUST_BE_ZERO = [
  'crashes',
  'lost',
  'still_pending',
  'state_parse_failures',
  'fifo_violations',
  'record_mismatches',
  'misrouted',
  'unframed_prompts',
  'stuck_in_flight',
] as const;

export function verdict(r: Report): string[] {
  const bad: string[] = MUST_BE_ZERO.filter((k) => r[k] !== 0).map((k) => `${k}=${r[k]}`);
  if (r.duplicate_prompts.outside_crash_window !== 0)
    bad.push(`duplicate_prompts.outside_crash_window=${r.duplicate_prompts.outside_crash_window}`);
  return bad;
}

interface Delivery {
  rid: string;
  id: string;
  via: 'push' | 'pull';
  inc: number;
  at: number;
  /** Position of the prompt or pull in its recipient's record (one batch = one position). */
  batch: number;
}

const key = (name: string, inc: number) => `${name}#${inc}`;

/** A late commit refused this long after a machine came back is still that outage's (the
 *  returning process's connection catches up first). */
const OUTAGE_SETTLE_MS = 10_000;

function add<K, V>(m: Map<K, V[]>, k: K, v: V) {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

export function analyse(ev: Evidence): Report {
  const examples: Record<string, string[]> = {};
  const note = (figure: string, text: string) => {
    const list = (examples[figure] ??= []);
    if (list.length < 5) list.push(text);
  };
  const lives = new Map(ev.incarnations.map((i) => [key(i.name, i.inc), i]));
  const byId = new Map(ev.envelopes.map((e) => [e.message_id, e]));
  const origin = new Map<string, Origin>();
  for (const e of ev.envelopes) {
    const o = parseToken(e.content);
    if (o) origin.set(e.message_id, o);
  }

  // ---- sends: what the store holds against what the writers recorded ----------------------------
  let record_mismatches = 0;
  const accepted = new Set<string>();
  const storeSends = new Map<string, string[]>(); // writer#inc#seq → ids
  for (const [id, o] of origin) {
    accepted.add(id);
    const k = `${key(o.writer, o.inc)}#${o.seq}`;
    add(storeSends, k, id);
  }
  const refused: Record<string, number> = {};
  let accepted_sends = 0;
  const recordedSends = new Set<string>();
  const refusedSends = new Set<string>();
  const lastSeq = new Map<string, number>(); // writer#inc → last recorded action
  const lastAt = new Map<string, number>();
  for (const [writer, recs] of Object.entries(ev.writers))
    for (const r of recs) {
      const life = key(writer, r.inc);
      lastSeq.set(life, Math.max(lastSeq.get(life) ?? 0, r.seq));
      lastAt.set(life, Math.max(lastAt.get(life) ?? 0, r.at));
      const k = `${life}#${r.seq}`;
      if (r.kind === 'refused') {
        refused[r.reason] = (refused[r.reason] ?? 0) + 1;
        refusedSends.add(k);
        if (storeSends.has(k)) {
          record_mismatches++;
          note(
            'record_mismatches',
            `${k} recorded as refused (${r.reason}) but the store holds ${storeSends.get(k)!.join(',')}`,
          );
        }
      } else if (r.kind === 'sent') {
        accepted_sends++;
        recordedSends.add(k);
        for (const id of r.ids) accepted.add(id);
        const held = new Set(storeSends.get(k) ?? []);
        if (r.ids.length !== held.size || r.ids.some((id) => !held.has(id) || !MESSAGE_ID_RE.test(id))) {
          record_mismatches++;
          note(
            'record_mismatches',
            `${k} recorded ids ${r.ids.join(',')} but the store holds ${[...held].join(',') || 'none'}`,
          );
        }
      }
    }
  let accepted_unrecorded = 0;
  for (const k of storeSends.keys()) {
    if (recordedSends.has(k) || refusedSends.has(k)) continue; // a refused one is counted above
    const [writer, incs, seqs] = k.split('#');
    const life = key(writer!, Number(incs));
    if (lives.get(life)?.killed && Number(seqs) > (lastSeq.get(life) ?? 0)) accepted_unrecorded++;
    else {
      record_mismatches++;
      note(
        'record_mismatches',
        `${k} is in the store but its writer neither recorded it nor was killed right after it`,
      );
    }
  }

  // ---- deliveries, in each recipient's own order ---------------------------------------------------
  const deliveries: Delivery[] = [];
  let unframed_prompts = 0;
  for (const [rid, recs] of Object.entries(ev.owners))
    recs.forEach((p, batch) => {
      if (!p.framed) {
        unframed_prompts++;
        note('unframed_prompts', `${rid} prompt at ${p.at} does not name every id in its frames`);
      }
      for (const id of p.ids) deliveries.push({ rid, id, via: 'push', inc: p.inc, at: p.at, batch });
    });
  for (const [rid, recs] of Object.entries(ev.writers))
    recs.forEach((r, batch) => {
      if (r.kind === 'pulled')
        for (const id of r.ids) deliveries.push({ rid, id, via: 'pull', inc: r.inc, at: r.at, batch });
    });
  let misrouted = 0;
  const seen = new Map<string, Delivery[]>();
  for (const d of deliveries) {
    const e = byId.get(d.id);
    if (e && e.recipient_session_id !== d.rid) {
      misrouted++;
      note('misrouted', `${d.id} for ${e.recipient_session_id} was handed to ${d.rid}`);
    }
    add(seen, d.id, d);
  }

  // A pull the store committed to a writer killed before it recorded it: that incarnation's last
  // action, so its delivered_at is not before the incarnation's last record.
  const pullUnrecorded = new Map<string, number>(); // id → delivered_at
  for (const e of ev.envelopes) {
    if (
      e.delivery_status !== 'delivered' ||
      e.delivery_method !== 'pull' ||
      seen.has(e.message_id) ||
      e.delivered_at === null
    )
      continue;
    const rid = e.recipient_session_id;
    const life = ev.incarnations.find(
      (i) => i.name === rid && i.started_at <= e.delivered_at! && (i.ended_at ?? Infinity) >= e.delivered_at!,
    );
    if (life?.killed && e.delivered_at >= (lastAt.get(key(rid, life.inc)) ?? 0))
      pullUnrecorded.set(e.message_id, e.delivered_at);
  }

  // ---- lost, pending, stuck ---------------------------------------------------------------------------
  let lost = 0;
  let still_pending = 0;
  let push = 0;
  let pull = 0;
  for (const id of accepted) {
    const e = byId.get(id);
    const got = seen.get(id);
    if (e?.delivery_status === 'pending') {
      still_pending++;
      note('still_pending', id);
    } else if (e?.delivery_status === 'delivered' && got?.length) {
      if (got[0]!.via === 'push') push++;
      else pull++;
    } else if (!pullUnrecorded.has(id)) {
      lost++;
      note(
        'lost',
        `${id}: ${e ? `${e.delivery_status} via ${e.delivery_method}, ${got?.length ?? 0} delivery record(s)` : 'not in the store'}`,
      );
    }
  }

  // ---- duplicates ---------------------------------------------------------------------------------------
  const fenced = fencedCommits(ev);
  const fencedHolds = new Set<string>();
  for (const f of fenced.list)
    for (const id of f.ids) for (const life of f.lives) fencedHolds.add(`${key(life.name, life.inc)}:${id}`);
  let inside = 0;
  let outside = 0;
  for (const [id, list] of seen) {
    const receipts = byId.get(id)?.transitions ?? [];
    const lastDrain = receipts.map((t) => t[0]).lastIndexOf('DRAIN');
    const resurrected = receipts.some((t, i) => t[0] === 'COMMIT' && i < lastDrain);
    for (let i = 1; i < list.length; i++) {
      const [a, b] = [list[i - 1]!, list[i]!];
      const firstOwner = lives.get(key(a.rid, a.inc));
      const pushed = a.via === 'push' && b.via === 'push' && !resurrected;
      const crashed =
        a.inc !== b.inc &&
        !!firstOwner?.killed &&
        firstOwner.ended_at !== null &&
        firstOwner.ended_at >= a.at &&
        firstOwner.ended_at <= b.at;
      if (pushed && (crashed || fencedHolds.has(`${key(a.rid, a.inc)}:${id}`))) inside++;
      else {
        outside++;
        note(
          'duplicate_prompts.outside_crash_window',
          `${id} handed to ${b.rid} again (${a.via}#${a.inc} at ${a.at}, then ${b.via}#${b.inc} at ${b.at})`,
        );
      }
    }
  }

  // ---- FIFO per sender → recipient → channel ----------------------------------------------------------
  const streams = new Map<string, Array<{ id: string; order: number }>>();
  const streamOf = (e: Envelope) => `${e.sender_session_id}>${e.recipient_session_id}@${e.channel_id}`;
  for (const id of accepted) {
    const e = byId.get(id);
    const o = origin.get(id);
    if (!e || !o) continue;
    add(streams, streamOf(e), { id, order: sendOrder(o) });
  }
  const position = new Map<string, number>(); // id → index in its stream, by send order
  for (const s of streams.values())
    for (const [i, m] of s.sort((x, y) => x.order - y.order).entries()) position.set(m.id, i);
  const firstSeen = new Set<string>();
  const cursor = new Map<string, number>(); // stream → first index not yet handed over
  let fifo_violations = 0;
  const byRecipient = new Map<string, Delivery[]>();
  for (const d of deliveries) add(byRecipient, d.rid, d);
  for (const list of byRecipient.values()) {
    const lastInBatch = new Map<string, { batch: number; pos: number }>();
    for (const d of list) {
      const e = byId.get(d.id);
      const pos = position.get(d.id);
      if (!e || pos === undefined) continue;
      const sk = streamOf(e);
      const prev = lastInBatch.get(sk);
      if (prev && prev.batch === d.batch && prev.pos >= pos) {
        fifo_violations++;
        note('fifo_violations', `${d.id} follows a later message of ${sk} inside one hand-over`);
      }
      lastInBatch.set(sk, { batch: d.batch, pos });
      if (firstSeen.has(d.id)) continue;
      firstSeen.add(d.id);
      const stream = streams.get(sk)!;
      let c = cursor.get(sk) ?? 0;
      const handed = (i: number) =>
        firstSeen.has(stream[i]!.id) || (pullUnrecorded.get(stream[i]!.id) ?? Infinity) <= d.at;
      while (c < stream.length && handed(c)) c++;
      cursor.set(sk, c);
      if (c < pos) {
        fifo_violations++;
        note('fifo_violations', `${d.id} (#${pos} of ${sk}) handed over before ${stream[c]!.id} (#${c})`);
      }
    }
  }

  const failures = ev.checks.filter((c) => c.kind === 'failure');
  for (const f of failures) note('state_parse_failures', f.kind === 'failure' ? f.cause : '');
  const crashes = ev.incarnations.filter((i) => i.exit !== null);
  for (const c of crashes) note('crashes', `${c.name}#${c.inc} exited on its own (${c.exit})`);
  const tally = ev.checks.find((c) => c.kind === 'tally');
  const state_reads_refused: Record<string, number> = {};
  for (const c of ev.checks)
    if (c.kind === 'refused') state_reads_refused[c.reason] = (state_reads_refused[c.reason] ?? 0) + 1;
  return {
    kills: ev.kills,
    crashes: crashes.length,
    accepted_sends,
    accepted_unrecorded,
    accepted_envelopes: accepted.size,
    refused_sends: refused,
    delivered: { push, pull, pull_unrecorded: pullUnrecorded.size },
    swept_envelopes: ev.envelopes.filter((e) => e.transitions.some((t) => t[0] === 'SWEEP')).length,
    lost,
    still_pending,
    state_reads: tally?.kind === 'tally' ? tally.reads : 0,
    state_parse_failures: failures.length,
    state_reads_refused,
    fenced_commits: fenced.list.length,
    fenced_commits_outside_outages: fenced.outsideOutages,
    fifo_violations,
    duplicate_prompts: { inside_crash_window: inside, outside_crash_window: outside },
    record_mismatches,
    misrouted,
    unframed_prompts,
    stuck_in_flight: ev.inFlightAtEnd,
    examples,
  };
}

/** Every commit the store fenced (seen by the checker or left in the final state), with the
 *  envelopes it named and the incarnation whose process tag made it. */
function fencedCommits(ev: Evidence) {
  const byKey = new Map<string, { at: number; message: string }>();
  for (const c of ev.checks) if (c.kind === 'fenced') byKey.set(`${c.at}:${c.message}`, c);
  for (const f of ev.fenced ?? []) byKey.set(`${f.at}:${f.message}`, f);
  const list = [...byKey.values()].map((f) => {
    const pid = Number(/ by (\d+)@/.exec(f.message)?.[1]);
    return {
      at: f.at,
      ids: f.message.match(/ocm_[0-9a-f]{32}/g) ?? [],
      // The incarnation alive with that PID when the refusal was recorded.
      lives: ev.incarnations.filter((i) => i.pid === pid && i.started_at <= f.at && (i.ended_at ?? Infinity) >= f.at),
    };
  });
  const during = (at: number) => (ev.outages ?? []).some((o) => o.from <= at && at <= o.to + OUTAGE_SETTLE_MS);
  return { list, outsideOutages: list.filter((f) => !during(f.at)).length };
}
