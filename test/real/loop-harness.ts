// Helpers of the politeness-loop tests (`loop-*.test.ts`, the wake guard of issue 41): two sessions
// whose fake model answers EVERY OpenComms message it is shown with a NEW `opencomms_send` to the
// other member (no reply_to, a short polite text that never repeats), so without a guard each
// answer wakes the other session and the pair talks forever. What the tests read:
//   * the fake model's requests: which turns OpenComms started (a wake), which frames the model was
//     shown and where, and the held mail's hand-over at a person-typed prompt;
//   * `.opencomms/` (state.json + journal, history logs): the wake lines (`channel.wakes[rid]`),
//     the holds (`channel.holds[rid]`), the cost ledger (`channel.usage[rid]`), each envelope's fate.
// Nothing here writes to the project: the state is read as any process loads it.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelRequest } from './fake/index.ts';
import { newestInput } from './limits-harness.ts';
import { allEnvelopes, readState } from './opencode-harness.ts';

export const CHANNEL = 'team';
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Wakes OpenComms may start in a row before the guard holds the next (src/protocol/limits.ts LOOP_WAKES). */
export const LOOP_WAKES = 6;
/** How long a held pair is watched for a further wake: past the guard's reflex window (20 s). */
export const HELD_WATCH_MS = 30_000;
/** The marker of the person-typed prompt that picks the held mail up. */
export const PERSON = '[person]';
/** OpenComms' own line before held mail (spec: "OpenComms: N message(s) from …, held since … by the
 *  loop guard: …"): it names the hold and the loop guard. */
export const NOTICE_RE = /^.*\bheld\b.*\bloop guard\b.*$/im;

/** Resolves once `count()` (requests the fakes got) has not changed for `ms`: the turns in progress
 *  when the guard held (the last sender's own turn end) are over. */
export async function quiet(count: () => number, ms = 3000, max = 30_000): Promise<number> {
  const end = Date.now() + max;
  let last = count(),
    since = Date.now();
  while (Date.now() - since < ms) {
    if (Date.now() > end) throw new Error(`still busy after ${max} ms (${count()} requests)`);
    await sleep(100);
    const n = count();
    if (n !== last) {
      last = n;
      since = Date.now();
    }
  }
  return last;
}

/** Writes to the project's state so far: the lines of its journals (every mutation appends one; a
 *  compaction starts a new journal, whose lines count on). A held wake writes its hold once; a
 *  process that re-drains the held mail in a loop shows here as thousands. */
export function stateWrites(proj: string): number {
  const dir = join(proj, '.opencomms', 'journal');
  if (!existsSync(dir)) return 0;
  let n = 0;
  for (const f of readdirSync(dir)) {
    try {
      n += readFileSync(join(dir, f), 'utf8').split('\n').filter(Boolean).length;
    } catch {
      // compacted away meanwhile
    }
  }
  return n;
}

/** Counts state writes from now on (polling `stateWrites`; a compaction, which removes the old
 *  journal, counts the new journal's lines from zero). `stop()` returns the count. */
export function countWrites(proj: string): { stop(): number } {
  let last = stateWrites(proj),
    total = 0;
  const poll = () => {
    const n = stateWrites(proj);
    total += n >= last ? n - last : n;
    last = n;
  };
  const t = setInterval(poll, 100);
  return {
    stop() {
      clearInterval(t);
      poll();
      return total;
    },
  };
}

/** Processes (other than this one) whose environment or command line names `root`. */
export function processesOf(root: string): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    if (Number(p) === process.pid) continue;
    try {
      if (
        readFileSync(`/proc/${p}/environ`, 'utf8').includes(root) ||
        readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(root)
      )
        out.push(Number(p));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** Waits (at most `ms`) until no process of the sandbox is left: a host ending after its terminal
 *  closed runs its last hooks (SessionEnd writes the state), which would race the sandbox's removal. */
export async function settleProcesses(root: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (processesOf(root).length && Date.now() < end) await sleep(100);
}

/** The frame ids (`| id: ocm_… |` headers) of a text, in order, each occurrence. */
export const frameIds = (text: string) => [...text.matchAll(/\| id: (ocm_[0-9a-f]{32}) \|/g)].map((m) => m[1]!);

/** Every text of a request's conversation the model reads (user, system/developer, tool results),
 *  as one string: the history a host resends with every request. */
export function wholeConversation(req: ModelRequest): string {
  const b = req.body ?? {};
  return JSON.stringify([b.system ?? null, b.instructions ?? null, b.messages ?? null, b.input ?? null]);
}

/** What one session's model did, for the report and the checks. */
export interface ModelLog {
  /** Frame ids, in the order the model first saw them. */
  seen: string[];
  /** Each send the model made: the frames it answered. */
  answers: Array<{ at: number; answered: string[] }>;
}

/**
 * The polite model of one session, as a fake-model line (give the fake many of them):
 *  - the start prompt (`start.marker` in it): `start.line` (create or join the channel);
 *  - OpenComms' own "… waiting … call opencomms_pull" line (Codex's Stop notice): a pull;
 *  - new frames (not seen before) in what the host added since the model's last turn (a wake, a
 *    hook's context, a pull's result): ONE send to `to` answering all of them, unless the turn is
 *    the person's ([person]: the person asked what is new) or the mail comes after OpenComms'
 *    notice of a hold ("reply only if it changes the work"), which it only reads;
 *  - after any other tool result: `SAY done`; else `SAY ok`.
 */
export function politeModel(o: {
  send: string;
  pull?: string;
  to: string;
  name: string;
  start?: { marker: string; line: string };
  log: ModelLog;
}) {
  let n = 0;
  return (req: ModelRequest): string => {
    const newest = newestInput(req);
    const fresh = frameIds(newest).filter((id) => !o.log.seen.includes(id));
    o.log.seen.push(...new Set(fresh));
    if (o.start && !req.endsWithToolResult && newest.includes(o.start.marker)) return o.start.line;
    if (newest.includes(PERSON) && !req.endsWithToolResult) return 'SAY Read it; nothing to add for now.';
    // OpenComms' notice on held mail says an acknowledgement starts the loop again: heeded.
    if (NOTICE_RE.test(newest) && !req.endsWithToolResult) return 'SAY Read the held mail; nothing to add.';
    if (fresh.length) {
      o.log.answers.push({ at: Date.now(), answered: [...new Set(fresh)] });
      n++;
      const polite = ['Noted, standing by.', 'Thanks, noted.', 'Understood, standing by.', 'Got it, thank you.'][n % 4];
      const content = `${polite} (${o.name} #${n}, on ${fresh.map((id) => id.slice(4, 12)).join(' ')})`;
      return `CALL ${o.send} ${JSON.stringify({ channel: CHANNEL, content, to: o.to })}`;
    }
    if (o.pull && /message\(s\)[^\n]{0,160}waiting[^\n]{0,240}opencomms_pull/i.test(newest)) return `CALL ${o.pull} {}`;
    if (req.endsWithToolResult && o.pull && remainingIn(req.toolResults.at(-1)?.text ?? '') > 0)
      return `CALL ${o.pull} {}`;
    return req.endsWithToolResult ? 'SAY done' : 'SAY ok';
  };
}

/** The `remaining` count of an OpenComms tool result (JSON after any host prefix), if readable. */
function remainingIn(text: string): number {
  const i = text.indexOf('{');
  if (i < 0) return 0;
  try {
    const r = JSON.parse(text.slice(i, text.lastIndexOf('}') + 1));
    return typeof r?.data?.remaining === 'number' ? r.data.remaining : 0;
  } catch {
    return 0;
  }
}

/** The state as any process loads it, or null while it is being replaced. */
export function state(proj: string): any {
  try {
    return readState(proj);
  } catch {
    return null;
  }
}

/** The member the wake guard holds on the channel, per the design: `channel.wakes[rid].held_by`
 *  or `channel.holds[rid]`, 'loop' | 'wake_budget'. */
export function heldMember(st: any): { rid: string; by: string } | null {
  const ch = st?.channels?.[CHANNEL];
  if (!ch) return null;
  for (const m of ch.members ?? []) {
    // `holds` also names the other holds of a recipient (busy, paused, …): only the guard's count.
    const by = ch.wakes?.[m.session_id]?.held_by ?? ch.holds?.[m.session_id];
    if (by === 'loop' || by === 'wake_budget') return { rid: m.session_id, by };
  }
  return null;
}

/** The wakes the cost ledger counts for a member (`channel.usage[rid].total.wakes`), or null
 *  when the state keeps no ledger (before the guard). */
export function ledgerWakes(st: any, rid: string): number | null {
  const n = st?.channels?.[CHANNEL]?.usage?.[rid]?.total?.wakes;
  return typeof n === 'number' ? n : null;
}

/** Every envelope of the channel (live and logged), oldest first by acceptance. */
export function envelopes(proj: string): any[] {
  const chId = state(proj)?.channels?.[CHANNEL]?.id;
  return [...allEnvelopes(proj).values()]
    .filter((e) => !chId || e.channel_id === chId)
    .sort((a, b) => a.timestamp - b.timestamp);
}

/** A compact line per envelope: id, sender → recipient role, status, method, attempts, wake_chain. */
export const describeEnvelopes = (proj: string) =>
  envelopes(proj)
    .map(
      (e) =>
        `${e.message_id.slice(0, 12)} ${e.sender_role}->${e.recipient_role} ${e.delivery_status}/${e.delivery_method ?? '-'} att ${e.attempts} chain ${e.wake_chain ?? '-'} ${JSON.stringify(String(e.content).slice(0, 60))}`,
    )
    .join('\n');

/** The guard's part of the state, for failure messages and the report. */
export function guardState(proj: string): string {
  const ch = state(proj)?.channels?.[CHANNEL];
  if (!ch) return '(no channel)';
  const roles = Object.fromEntries((ch.members ?? []).map((m: any) => [m.session_id, m.role]));
  const byRole = (o: any) =>
    o && typeof o === 'object' ? Object.fromEntries(Object.entries(o).map(([k, v]) => [roles[k] ?? k, v])) : o;
  return JSON.stringify({ wakes: byRole(ch.wakes), holds: byRole(ch.holds), usage: byRole(ch.usage) }, null, 0);
}

/**
 * The checks every host shares, on what the held session's model got at the person-typed prompt:
 * the notice line first (outside any frame), then exactly the held mail, once each, in the order
 * it was sent. Returns the problems found (empty = fine).
 */
export function checkHandOver(text: string, held: string[]): string[] {
  const out: string[] = [];
  const notice = NOTICE_RE.exec(text);
  if (!notice)
    out.push(`no OpenComms notice line naming "held" and "loop guard" in: ${JSON.stringify(text.slice(0, 600))}`);
  const ids = frameIds(text);
  if (JSON.stringify(ids) !== JSON.stringify(held))
    out.push(`frames handed over ${JSON.stringify(ids)} != held mail in order ${JSON.stringify(held)}`);
  if (notice && ids.length && text.indexOf(notice[0]) > text.indexOf(`| id: ${ids[0]} |`))
    out.push('the notice comes after the first frame');
  if (notice && (text.match(new RegExp(NOTICE_RE.source, 'gim')) ?? []).length !== 1)
    out.push('the notice appears more than once');
  return out;
}

/**
 * No message lost or duplicated: every envelope of the channel addressed to a session is in the
 * final request of that session's conversation exactly once, and every one is delivered.
 */
export function checkNoLossNoDup(
  proj: string,
  sessions: Array<{ rid: string; role: string; final: () => ModelRequest | undefined }>,
): string[] {
  const out: string[] = [];
  for (const s of sessions) {
    const mine = envelopes(proj).filter((e) => e.recipient_session_id === s.rid);
    const final = s.final();
    const ids = final ? frameIds(wholeConversation(final)) : [];
    for (const e of mine) {
      const n = ids.filter((x) => x === e.message_id).length;
      if (n !== 1) out.push(`${s.role}: ${e.message_id} shown ${n} times in its conversation`);
      if (e.delivery_status !== 'delivered') out.push(`${s.role}: ${e.message_id} is ${e.delivery_status}`);
    }
    const unknown = [...new Set(ids)].filter((id) => !mine.some((e) => e.message_id === id));
    if (unknown.length) out.push(`${s.role}: frames not addressed to it: ${unknown.join(' ')}`);
  }
  return out;
}
