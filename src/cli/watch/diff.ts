// `opencomms watch` as a pure function: what changed between what was already reported and the
// state now. Envelope lines come from each envelope's own receipt (`transitions`), so they carry
// the time the machine moved, not the time we noticed; an envelope that went terminal has left
// state.json for its history log, and the shell passes it in `logged`. Recipient and member lines
// compare the derived recipient-machine state (the console's, engine/deliveries.ts) and the
// member machine state before and after.
import { TERMINAL_STATUSES, type Envelope, type State } from '../../protocol/schema.ts';
import { mailIndex, recipientView, type RecipientState } from '../../engine/deliveries.ts';
import { tokensEstimate, WAKE_HOLD_LABEL, type WakeHold, wakeLineOf } from '../../engine/usage.ts';
import { machineLabel } from '../../runtime/placement.ts';
import { parseTag } from '../../runtime/process.ts';
import type { LeaseView } from '../../store/types.ts';

export type WatchLine =
  | {
      kind: 'envelope';
      at: number;
      channel: string;
      message_id: string;
      sender_role: string;
      recipient_role: string;
      /** The machine event (SEND, DRAIN, COMMIT, PULL, REQUEUE, SWEEP, TICK, REJECT), or PURGE
       *  when live mail left state with its channel: `archived` (saved) or `discarded` (deleted). */
      event: string;
      from: string | null;
      to: string;
      /** Hand-overs (DRAIN, PULL) so far, this transition included. */
      attempt: number;
    }
  | {
      kind: 'recipient';
      at: number;
      channel: string;
      session_id: string;
      role: string;
      /** null when the member just joined; `removed` when it left the channel. */
      from: RecipientState | 'stale' | null;
      to: RecipientState | 'stale' | 'removed';
      /** The computer hosting the member's session (null: recorded before computer ids). */
      machine: string | null;
    }
  | {
      /** A member's wake line became held (the loop guard or a wake budget holds the turns
       *  OpenComms would start for it) or was released (its wakes go again). */
      kind: 'wake';
      at: number;
      channel: string;
      session_id: string;
      role: string;
      /** null: its wakes went. */
      from: WakeHold | null;
      /** null: released (by the operator, or handed over at a turn OpenComms did not start). */
      to: WakeHold | null;
      /** The member was woken (a turn OpenComms started): from and to are null then. */
      woken?: true;
      /** What the member cost since the channel began: wakes, and the tokens handed to its model
       *  (an estimate: characters ÷ 4). */
      wakes: number;
      tokens_estimate: number;
    }
  | {
      /** A long-lived process's lease as the store's snapshots show it (a store with leases). */
      kind: 'process';
      at: number;
      process: string;
      pid: number;
      machine: string | null;
      /** null when the process first appears; `gone` when its lease row is no more. */
      from: LeaseHeld | null;
      to: LeaseHeld | 'gone';
    };

type LeaseHeld = 'holds' | 'expired';

interface Receipt {
  /** Transitions already reported. */
  n: number;
  channel_id: string;
  /** The last reported status. */
  status: string;
  sender_role: string;
  recipient_role: string;
}

/** What has been reported so far. */
export interface Seen {
  receipts: Map<string, Receipt>;
  /** `<channel_id>:<session_id>` → the last reported recipient state. */
  recipients: Map<string, RecipientSeen>;
  /** Channel names by id, for envelopes whose channel is gone. */
  names: Map<string, string>;
  /** `<channel_id>:<session_id>` → the last reported wake hold (absent: not held). */
  wakes: Map<string, WakeSeen>;
}

export const emptySeen = (): Seen => ({
  receipts: new Map(),
  recipients: new Map(),
  names: new Map(),
  wakes: new Map(),
});

/** Events that hand an envelope over (each counts an attempt, protocol.md "The machines"). */
const HAND_OVERS = new Set(['DRAIN', 'PULL']);

const isTerminal = (status: string) => (TERMINAL_STATUSES as readonly string[]).includes(status);

/** A recipient's line as watch shows it: a stale member is `stale` whatever its mail does. */
type RecipientLine = Extract<WatchLine, { kind: 'recipient' }>;
type RecipientSeen = { channel: string; role: string; state: RecipientState | 'stale'; machine: string | null };

/** A recipient's move; `key` is `<channel id>:<session id>`, as recipientStates keys it. */
const recipientLine = (
  at: number,
  key: string,
  r: RecipientSeen,
  from: RecipientLine['from'],
  to: RecipientLine['to'],
): RecipientLine => ({
  kind: 'recipient',
  at,
  channel: r.channel,
  session_id: key.slice(key.indexOf(':') + 1),
  role: r.role,
  from,
  to,
  machine: r.machine,
});

type WakeSeen = {
  channel: string;
  role: string;
  held: WakeHold | null;
  since: number | null;
  wakes: number;
  size: number;
};

/** The wake lines of live members that were ever woken or held (engine/usage.ts reads them as
 *  the report does), with what each cost. */
function wakeHolds(state: Readonly<State>) {
  const out = new Map<string, WakeSeen>();
  for (const ch of Object.values(state.channels)) {
    if (ch.lifecycle !== 'active') continue;
    for (const m of ch.members) {
      const w = wakeLineOf(ch, m.session_id);
      const total = ch.usage?.[m.session_id]?.total;
      if (w.held_by || total?.wakes)
        out.set(`${ch.id}:${m.session_id}`, {
          channel: ch.name,
          role: m.role,
          held: w.held_by,
          since: w.held_since,
          wakes: total?.wakes ?? 0,
          size: total?.size ?? 0,
        });
    }
  }
  return out;
}

/** Lines for wake holds that began, changed or ended (a member that left is the recipient line's). */
function wakeLines(seen: ReadonlyMap<string, WakeSeen>, now: Map<string, WakeSeen>, at: number): WatchLine[] {
  const line = (key: string, w: WakeSeen, from: WakeHold | null, to: WakeHold | null, when: number): WatchLine => ({
    kind: 'wake',
    at: when,
    channel: w.channel,
    session_id: key.slice(key.indexOf(':') + 1),
    role: w.role,
    from,
    to,
    wakes: w.wakes,
    tokens_estimate: tokensEstimate(w.size),
  });
  const lines: WatchLine[] = [];
  for (const [key, w] of now) {
    const before = seen.get(key);
    if (w.wakes > (before?.wakes ?? 0)) lines.push({ ...line(key, w, null, null, at), woken: true } as WatchLine);
    if ((before?.held ?? null) !== w.held)
      lines.push(line(key, w, before?.held ?? null, w.held, before ? at : (w.since ?? at)));
  }
  for (const [key, w] of seen) if (!now.has(key) && w.held) lines.push(line(key, w, w.held, null, at));
  return lines;
}

function recipientStates(state: Readonly<State>, now: number) {
  const out = new Map<string, RecipientSeen>();
  const index = mailIndex(state);
  for (const ch of Object.values(state.channels)) {
    if (ch.lifecycle !== 'active') continue;
    for (const m of ch.members)
      out.set(`${ch.id}:${m.session_id}`, {
        channel: ch.name,
        role: m.role,
        state: m.stale ? 'stale' : recipientView(state, ch, m, now, index).state,
        machine: m.machine,
      });
  }
  return out;
}

/**
 * Lines for everything that moved since `seen`, oldest first, and the new `seen`. `logged` are
 * envelopes read from history logs (newest tails and any vanished envelope found there); `read`
 * names the channels whose log tail was read this time: a reported terminal envelope of such a
 * channel that is no longer in its tail is forgotten, so `seen` stays bounded.
 */
export function diff(
  seen: Seen,
  state: Readonly<State>,
  logged: readonly Envelope[],
  read: ReadonlySet<string>,
  now: number,
  silent = false,
): { lines: WatchLine[]; seen: Seen } {
  const lines: WatchLine[] = [];
  const names = new Map(seen.names);
  for (const ch of Object.values(state.channels)) names.set(ch.id, ch.name);
  const receipts = new Map<string, Receipt>();
  const current = new Map<string, Envelope>();
  // The longer receipt is the newer copy: the state and the log are read one after the other,
  // and a log line is written before the state that drops the envelope.
  for (const e of [...Object.values(state.messages), ...logged]) {
    const have = current.get(e.message_id);
    if (!have || e.transitions.length > have.transitions.length) current.set(e.message_id, e);
  }

  for (const e of current.values()) {
    const before = seen.receipts.get(e.message_id);
    const from = before?.n ?? 0;
    let attempt = 0;
    e.transitions.forEach(([event, to, at], i) => {
      if (HAND_OVERS.has(event)) attempt++;
      if (silent || i < from) return;
      lines.push({
        kind: 'envelope',
        at,
        channel: names.get(e.channel_id) ?? e.channel_id,
        message_id: e.message_id,
        sender_role: e.sender_role,
        recipient_role: e.recipient_role,
        event,
        from: i > 0 ? e.transitions[i - 1]![1] : null,
        to,
        attempt,
      });
    });
    receipts.set(e.message_id, {
      n: Math.max(from, e.transitions.length),
      channel_id: e.channel_id,
      status: e.delivery_status,
      sender_role: e.sender_role,
      recipient_role: e.recipient_role,
    });
  }
  for (const [id, r] of seen.receipts) {
    if (receipts.has(id)) continue;
    // Reported to its end and out of a tail we read: it cannot come back, forget it.
    if (isTerminal(r.status) && read.has(r.channel_id)) continue;
    if (isTerminal(r.status)) {
      receipts.set(id, r);
      continue;
    }
    // Live mail that left state with no log record: its channel was saved (the archive holds it)
    // or deleted (discarded).
    const saved = Object.values(state.channels).some((c) => c.id === r.channel_id && c.lifecycle === 'saved');
    if (!silent)
      lines.push({
        kind: 'envelope',
        at: now,
        channel: names.get(r.channel_id) ?? r.channel_id,
        message_id: id,
        sender_role: r.sender_role,
        recipient_role: r.recipient_role,
        event: 'PURGE',
        from: r.status,
        to: saved ? 'archived' : 'discarded',
        attempt: 0,
      });
  }

  const recipients = recipientStates(state, now);
  const wakes = wakeHolds(state);
  if (!silent) {
    // A member that left takes its hold with it: the recipient line says `removed`.
    const stayed = new Map([...seen.wakes].filter(([key]) => recipients.has(key)));
    lines.push(...wakeLines(stayed, wakes, now));
    for (const [key, r] of recipients) {
      const before = seen.recipients.get(key);
      if (before?.state !== r.state) lines.push(recipientLine(now, key, r, before?.state ?? null, r.state));
    }
    for (const [key, r] of seen.recipients)
      if (!recipients.has(key)) lines.push(recipientLine(now, key, r, r.state, 'removed'));
  }
  lines.sort((a, b) => a.at - b.at);
  return { lines, seen: { receipts, recipients, names, wakes } };
}

/** Lines for the processes whose lease moved since `seen` (tag → what was reported). */
export function leaseLines(
  seen: ReadonlyMap<string, LeaseHeld>,
  view: LeaseView,
  now: number,
): { lines: WatchLine[]; seen: Map<string, LeaseHeld> } {
  const next = new Map<string, LeaseHeld>();
  for (const tag of view.left.keys()) next.set(tag, view.live.has(tag) ? 'holds' : 'expired');
  const line = (tag: string, from: LeaseHeld | null, to: LeaseHeld | 'gone'): WatchLine => {
    const t = parseTag(tag);
    return { kind: 'process', at: now, process: tag, pid: t.pid, machine: t.machine, from, to };
  };
  const lines: WatchLine[] = [];
  for (const [tag, to] of next) if (seen.get(tag) !== to) lines.push(line(tag, seen.get(tag) ?? null, to));
  for (const [tag, from] of seen) if (!next.has(tag)) lines.push(line(tag, from, 'gone'));
  return { lines, seen: next };
}

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);
/** Characters of an id on a line: `ocm_` + 8 hex tells envelopes apart at a glance; --json has it all. */
const ID_SHOWN = 12;

/** One line of the terminal view, like `kubectl get -w`. */
export function renderLine(l: WatchLine): string {
  if (l.kind === 'envelope') {
    const move =
      l.from === null
        ? `${l.event} → ${l.to}`
        : `${l.from} → ${l.to} (${l.event}${HAND_OVERS.has(l.event) ? `, attempt ${l.attempt}` : ''})`;
    return `${clock(l.at)}  ${l.channel}  envelope   ${l.message_id.slice(0, ID_SHOWN)}…  ${l.sender_role} → ${l.recipient_role}  ${move}`;
  }
  if (l.kind === 'wake') {
    const who = `${l.role} (${l.session_id.slice(0, ID_SHOWN)})`;
    const was = l.from ? `held by the ${WAKE_HOLD_LABEL[l.from]}` : null;
    const cost = `${l.wakes} wake(s) since the channel began, ~${l.tokens_estimate} tokens handed over (estimate)`;
    return `${clock(l.at)}  ${l.channel}  wake       ${
      l.woken
        ? `woken: ${who}; ${cost}`
        : l.to
          ? `held: ${who} by the ${WAKE_HOLD_LABEL[l.to]}${was ? ` (was ${was})` : ''}; ${cost}`
          : `released: ${who} (was ${was})`
    }`;
  }
  if (l.kind === 'process')
    return `${clock(l.at)}  -  process    pid ${l.pid} on ${machineLabel(l.machine, null)}  ${l.from ?? 'new'} → ${l.to}`;
  return `${clock(l.at)}  ${l.channel}  recipient  ${l.role} (${l.session_id.slice(0, ID_SHOWN)}) on ${machineLabel(l.machine, null)}  ${l.from ?? 'joined'} → ${l.to}`;
}
