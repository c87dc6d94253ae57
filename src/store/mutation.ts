// The steps of a mutation every store takes alike on the state it holds: run it on a tracked
// draft, then take its changes (written through the draft or planned as operations) and check
// them before anything is written. A throw, an unchanged answer or an invalid change leaves the
// state as it was.
import { applyOps, detach, track, type Draft, type Op } from '../protocol/draft.ts';
import type { State } from '../protocol/schema.ts';
import type { MutateOutcome } from './types.ts';
import { checkOps } from './validate.ts';

/** Runs `fn` on a tracked draft of `state`; `out` is null when nothing is to be written (the draft
 *  is rolled back then, and on a throw). */
export function runOnDraft<T>(
  state: State,
  fn: (draft: State) => MutateOutcome<T>,
): { result: T; out: null } | { result: T; out: MutateOutcome<T>; draft: Draft<State> } {
  const draft = track(state);
  let out: MutateOutcome<T>;
  try {
    out = fn(draft.root);
  } catch (e) {
    draft.rollback();
    throw e;
  }
  const result = detach(out.result);
  if (!out.changed) {
    draft.rollback();
    return { result, out: null };
  }
  return { result, out, draft };
}

/** The mutation's operations, now applied to `state`, checked (defaults backfilled), and how to
 *  take them back. Planned operations replace the draft's writes; a mutation doing both is a fault. */
export function checkedChanges(
  state: State,
  draft: Draft<State>,
  planned: readonly Op[] | undefined,
): { ops: Op[]; undo: () => void } {
  let written: readonly Op[] = draft.ops();
  let undo = () => draft.rollback();
  if (planned) {
    const stray = written.length;
    draft.rollback();
    if (stray) throw new Error('a mutation both wrote through its draft and planned operations; nothing was written');
    written = planned;
    undo = applyOps(state, planned);
  }
  const checked = checkOps(state, written, true);
  if (checked.problem) {
    undo();
    throw new Error(`refusing to save an invalid state (${checked.problem}); nothing was written`);
  }
  return { ops: checked.ops, undo };
}

/** Whether `ops` (applied to `state`) write channel `key`'s part of the state only: the channel
 *  itself, envelopes of it (as `state` holds them, or as `left` lists those that left it) and the
 *  queues of members of no other channel. Such a change is ordered among that channel's changes
 *  only (Store.mutate's scope); any other is ordered among all. */
export function opsWithin(
  state: Readonly<State>,
  ops: readonly Op[],
  key: string,
  left?: readonly { message_id: string; channel_id: string }[],
): boolean {
  const ch = state.channels[key];
  if (!ch) return false;
  let own: Set<string> | null = null;
  const ownMember = (rid: string) => {
    if (!own) {
      own = new Set(ch.members.map((m) => m.session_id));
      for (const k in state.channels)
        if (k !== key) for (const m of state.channels[k]!.members) own.delete(m.session_id);
    }
    return own.has(rid);
  };
  let gone: Map<string, { channel_id: string }> | null = null;
  const leftEnvelope = (id: string) => {
    gone ??= new Map(left?.map((x) => [x.message_id, x]));
    return gone.get(id);
  };
  for (const op of ops) {
    const [top, id] = op[1];
    if (id === undefined) return false;
    if (top === 'channels') {
      if (id !== key) return false;
    } else if (top === 'messages') {
      const e = state.messages[id] ?? leftEnvelope(id);
      if (e?.channel_id !== ch.id) return false;
    } else if (top === 'queues' || top === 'delivered_to') {
      if (!ownMember(id)) return false;
    } else return false;
  }
  return true;
}
