// The woken turn's side of a Codex wake: its UserPromptSubmit hook sees the wake prompt, takes the
// batch the waiter holds in flight under the tag the prompt names, and hands it to the model as
// additionalContext. Commit first, frame only what the commit settled: a batch the waiter already
// requeued (its confirmation deadline passed) is not shown here but by the boundary pull after it,
// so each message reaches the model once.
import { joinFrames, frameEnvelope } from '../../src/framing.ts';
import { endedNotice } from '../../src/engine/wakes.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';
import { wakeTag } from './wake-trigger.ts';

export async function handWokenBatch(rt: Runtime, prompt: string | undefined, member: string): Promise<string> {
  const tag = wakeTag(prompt);
  if (!tag) return '';
  const state = await rt.peek();
  const held = Object.values(state.messages)
    .filter((e) => e.recipient_session_id === member && e.delivery_status === 'in_flight' && e.in_flight_by === tag)
    .sort((a, b) => a.timestamp - b.timestamp);
  if (!held.length) return '';
  const names = new Map(Object.values(state.channels).map((ch) => [ch.id, ch.name]));
  const frames = new Map(held.map((e) => [e.message_id, frameEnvelope(e, names.get(e.channel_id) ?? e.channel_id)]));
  // Committed under the hold the waiter drained them with: a batch swept and handed over again
  // meanwhile is fenced, not committed twice.
  const r = await rt.run({
    op: 'commit',
    rid: member,
    message_ids: [...frames.keys()],
    method: 'push',
    held: { by: tag, attempts: held.map((e) => e.attempts) },
  });
  const settled = new Set(r.ok ? ((r.data as { delivered?: string[] }).delivered ?? []) : []);
  const shown = held.filter((e) => settled.has(e.message_id));
  // A wake that ended a hold carries the hold's notice first (the drain's own text is not shown here).
  const notices = [...new Set(shown.map((e) => e.channel_id))].flatMap((id) => {
    const ch = Object.values(state.channels).find((c) => c.id === id);
    const first = shown.find((e) => e.channel_id === id)!;
    const n = ch
      ? endedNotice(
          ch,
          member,
          first.in_flight_at ?? -1,
          shown.filter((e) => e.channel_id === id),
        )
      : null;
    return n ? [n] : [];
  });
  const batch = joinFrames(shown.map((e) => frames.get(e.message_id)!));
  return [...notices, batch].filter(Boolean).join('\n\n');
}
