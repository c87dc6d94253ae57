// Hot state stays small: terminal envelopes beyond the newest HOT_TERMINAL_PER_CHANNEL of a
// channel leave state.json for the channel's history log (the store appends them before it saves),
// and the live total is capped at MAX_PERSISTED_MESSAGES.
import { HOT_TERMINAL_PER_CHANNEL, MAX_BATCH, MAX_PERSISTED_MESSAGES } from '../protocol/limits.ts';
import { raw } from '../protocol/draft.ts';
import { TERMINAL_STATUSES, type Envelope, type State } from '../protocol/schema.ts';
import { recordError } from './lookup.ts';

/** In-flight envelopes are not in any queue: this many are allowed for before the exact count
 *  is taken (a batch for each of 50 recipients at once). */
const MAX_IN_FLIGHT_ALLOWANCE = 50 * MAX_BATCH;

const lastChange = (e: Envelope) => e.transitions.at(-1)?.[2] ?? e.timestamp;

/** Removes an envelope and every reference to it. */
export function forget(state: State, id: string) {
  // Looked up in the plain state; only the removals go through the change tracker.
  const e = raw(state.messages)[id];
  delete state.messages[id];
  delete state.delivered_to[id];
  if (!e) return;
  const rid = e.recipient_session_id;
  const listed = raw(state.queues)[rid];
  if (!listed) return;
  const i = listed.indexOf(id);
  if (i < 0 && listed.length > 0) return;
  const q = state.queues[rid]!;
  if (i >= 0) q.splice(i, 1);
  if (q.length === 0) delete state.queues[rid];
}

/** Changed copies of stored envelopes (a step ran on each) take their places; a terminal one that
 *  hot state has no room for (HOT_TERMINAL_PER_CHANNEL = 0) leaves for the history log instead,
 *  never written back first: a pull of 100 wrote each delivered envelope and its readers and then
 *  removed both, four tracked writes where one does. The caller has taken them out of their
 *  queue. Returns those that left. */
export function writeBack(state: State, stepped: readonly Envelope[]): Envelope[] {
  const left: Envelope[] = [];
  for (const e of stepped) {
    const id = e.message_id;
    if (HOT_TERMINAL_PER_CHANNEL === 0 && TERMINAL_STATUSES.includes(e.delivery_status)) {
      delete state.messages[id];
      if (raw(state.delivered_to)[id]) delete state.delivered_to[id];
      left.push(e);
    } else state.messages[id] = e;
  }
  return left;
}

/** Moves the terminal envelopes among `candidates` beyond each channel's hot window out of state
 *  (oldest first); returns them for the history log. A candidate stands for its id: the envelope
 *  looked at is the one in state now (a step may have replaced it with a changed copy). A
 *  read-only look at the plain envelopes; removal goes through `state`. */
function moveTerminal(state: State, candidates: Iterable<Envelope>): Envelope[] {
  const terminalByChannel = new Map<string, Envelope[]>();
  const live = raw(state.messages);
  for (const c of candidates) {
    const e = live[c.message_id];
    if (e && TERMINAL_STATUSES.includes(e.delivery_status)) {
      const list = terminalByChannel.get(e.channel_id) ?? [];
      list.push(e);
      terminalByChannel.set(e.channel_id, list);
    }
  }
  const moved: Envelope[] = [];
  for (const list of terminalByChannel.values()) {
    if (list.length <= HOT_TERMINAL_PER_CHANNEL) continue;
    list.sort((a, b) => lastChange(a) - lastChange(b));
    for (const e of list.slice(0, list.length - HOT_TERMINAL_PER_CHANNEL)) {
      forget(state, e.message_id);
      moved.push(e);
    }
  }
  return moved;
}

/** Whether the live total may pass MAX_PERSISTED_MESSAGES once `adding` more are queued.
 *  Terminal envelopes never stay, so the live count is the pending (queued) plus the in-flight
 *  ones; the queues' lengths, one per recipient, tell cheaply when the cap may be near. Far
 *  from it, retention has nothing to do for an operation that made no envelope terminal. */
export function nearCap(state: State, adding = 0): boolean {
  let queued = adding;
  for (const q of Object.values(raw(state.queues))) queued += q.length;
  return HOT_TERMINAL_PER_CHANNEL !== 0 || queued > MAX_PERSISTED_MESSAGES - MAX_IN_FLIGHT_ALLOWANCE;
}

/** Returns the envelopes that left hot state for the history log. `touched` = the envelopes this
 *  operation may have made terminal (its hot path passes them, so the cost follows the operation,
 *  not the number of live envelopes); without it every live envelope is looked at. */
export function enforceRetention(state: State, now: number, touched?: Iterable<Envelope>): Envelope[] {
  const moved = moveTerminal(state, touched ?? Object.values(raw(state.messages)));
  if (!nearCap(state)) return moved;
  // Near the cap: every terminal envelope left over (a state written with a larger hot window)
  // goes before any live one is counted.
  if (touched) moved.push(...moveTerminal(state, Object.values(raw(state.messages))));
  const ids = Object.keys(raw(state.messages));
  if (ids.length > MAX_PERSISTED_MESSAGES) {
    // Retention (protocol.md "Rules and defaults"): over the cap, terminal envelopes go first (oldest first), then the oldest pending.
    const all = ids.map((id) => state.messages[id]!);
    const terminal = all
      .filter((e) => TERMINAL_STATUSES.includes(e.delivery_status))
      .sort((a, b) => lastChange(a) - lastChange(b))
      .slice(0, ids.length - MAX_PERSISTED_MESSAGES);
    for (const e of terminal) {
      forget(state, e.message_id);
      moved.push(e);
    }
    const pending = all
      .filter((e) => e.delivery_status === 'pending')
      .sort((a, b) => a.timestamp - b.timestamp)
      .slice(0, ids.length - terminal.length - MAX_PERSISTED_MESSAGES);
    for (const e of pending) forget(state, e.message_id);
    if (pending.length)
      recordError(state, {
        at: now,
        reason: 'retention_pruned',
        message: `Retention pruned ${pending.length} undelivered envelope(s): more than ${MAX_PERSISTED_MESSAGES} were live.`,
      });
  }
  return moved;
}
