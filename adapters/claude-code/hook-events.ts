// The hook runner's full path (hosts.md "The hook runner"), loaded only when the fast path saw work: bind the
// session, clear a stale mark, confirm a wake the woken turn shows, sweep the batches of dead
// processes, and hand pending mail over at this boundary (drain + commit in ONE locked mutation,
// `delivery_method: push`). Fail-open: any fault answers `{}` and is recorded when the state is writable.
import { open, readFile } from 'node:fs/promises';
import { BATCH_SEPARATOR, FRAME_ID_MARK_RE, frameIdMark, shownSize } from '../../src/framing.ts';
import { MAX_BATCH } from '../../src/protocol/limits.ts';
import { routeLimit } from '../route-limits.ts';
import { channelHold } from '../../src/engine/deliver.ts';
import { hasInFlight } from '../../src/engine/receipts.ts';
import { roleInstructions } from '../../src/engine/roles.ts';
import type { State } from '../../src/protocol/schema.ts';
import { openRuntime, processAlive, processTag, type Runtime } from '../../src/runtime/runtime.ts';
import { handWokenBatch } from '../codex/wake-hook.ts';
import { SPAWN_HOSTS } from '../spawn.ts';
import { resolveMember, resolveOrBind } from './binding.ts';
import type { HookContext, HookEvent } from './hook-input.ts';

export interface HookOutput {
  hookSpecificOutput?: { hookEventName: HookEvent; additionalContext: string };
  decision?: 'block';
  reason?: string;
  systemMessage?: string;
}

/** How much of the transcript's end is read to find a woken turn's batch: the wake is the newest
 *  user turn when its Stop runs, and a turn's tool output rarely exceeds this. */
const TRANSCRIPT_TAIL_BYTES = 512 * 1024;

async function readWhole(path: string | undefined): Promise<string> {
  if (!path) return '';
  try {
    return await readFile(path, 'utf8');
  } catch {
    return '';
  }
}

async function transcriptTail(path: string | undefined): Promise<string> {
  if (!path) return '';
  try {
    const f = await open(path, 'r');
    try {
      const { size } = await f.stat();
      const len = Math.min(size, TRANSCRIPT_TAIL_BYTES);
      const buf = Buffer.alloc(len);
      await f.read(buf, 0, len, size - len);
      return buf.toString('utf8');
    } finally {
      await f.close();
    }
  } catch {
    return '';
  }
}

/** The transcript lines that show their text to the model. Claude Code records a wake it holds
 *  during a busy turn at once (a `queue-operation` line), before the model has seen it: that line
 *  proves nothing. A line cut by the tail, or not JSON, is left out too. */
function shownInTranscript(tail: string): string {
  return tail
    .split('\n')
    .filter((line) => {
      try {
        const row: unknown = JSON.parse(line);
        return typeof row === 'object' && row !== null && (row as { type?: unknown }).type !== 'queue-operation';
      } catch {
        return false;
      }
    })
    .join('\n');
}

/**
 * A wake waiter handed a batch to this host process (held in flight under its tag). The woken turn
 * carries that text: its UserPromptSubmit `prompt`, or the transcript by its Stop. Seeing it there
 * is the confirmation: the batch is committed now, exactly once.
 */
async function confirmWake(rt: Runtime, ctx: HookContext, member: string): Promise<void> {
  const pid = Number(ctx.env.CLAUDE_PID);
  if (!Number.isInteger(pid) || pid <= 0) return;
  const tag = processTag(pid);
  const state = await rt.peek();
  const held = Object.values(state.messages).filter(
    (e) => e.recipient_session_id === member && e.delivery_status === 'in_flight' && e.in_flight_by === tag,
  );
  if (!held.length) return;
  let seen = ctx.input.prompt ?? '';
  if (!held.every((e) => seen.includes(frameIdMark(e.message_id))))
    seen += shownInTranscript(await transcriptTail(ctx.input.transcript_path));
  const shown = held.filter((e) => seen.includes(frameIdMark(e.message_id)));
  // Committed under the hold the waiter drained them with: a batch swept and handed over again
  // meanwhile is fenced, not committed twice.
  if (shown.length)
    await rt.run({
      op: 'commit',
      rid: member,
      message_ids: shown.map((e) => e.message_id),
      method: 'push',
      held: { by: tag, attempts: shown.map((e) => e.attempts) },
    });
}

/** Batches in flight under processes that are gone (a killed host, a crashed server) go back to
 *  the queue before this boundary reads it. */
async function sweepDead(rt: Runtime, member: string): Promise<void> {
  const state = await rt.peek();
  const dead = Object.values(state.messages).some(
    (e) =>
      e.recipient_session_id === member &&
      e.delivery_status === 'in_flight' &&
      (!e.in_flight_by || !processAlive(e.in_flight_by)),
  );
  if (dead) await rt.run({ op: 'sweep', alive: processAlive });
}

/** A prompt that carries OpenComms frames is a wake (or a spawned run's batch): the host puts this
 *  hook's context BEFORE it, so newer mail handed over here would be read before older mail. */
const carriesMail = (prompt: string | undefined) => FRAME_ID_MARK_RE.test(prompt ?? '');

/** Codex shows a Stop hook's reason HTML-escaped inside `<hook_prompt>` (docs/hosts.md): a frame
 *  there would not have the shape the model is told about, so the model is sent to read it. */
const CODEX_STOP_NOTICE = (n: number) =>
  `OpenComms: ${n} new message(s) from your channel peers are waiting. Call the opencomms_pull tool to read them before you finish.`;

/** Mail a read could take now: queued envelopes on channels that hold nothing back, and nothing of
 *  this recipient in flight (a hook's read takes nothing then). */
function readable(state: Readonly<State>, member: string, now: number): number {
  const channels = Object.values(state.channels).filter(
    (c) => c.lifecycle === 'active' && c.members.some((m) => m.session_id === member),
  );
  if (channels.some((c) => hasInFlight(state, c, member))) return 0;
  const open = new Set(channels.filter((c) => channelHold(c, now) === null).map((c) => c.id));
  return (state.queues[member] ?? []).filter((id) => open.has(state.messages[id]?.channel_id ?? '')).length;
}

/** Pending mail handed over at this boundary, within `room` (shownSize units) of the hook's
 *  context: what the host shows whole (adapters/route-limits.ts). The rest stays pending, in order,
 *  and one line of OpenComms' own says so. */
async function handOver(rt: Runtime, member: string, room: number): Promise<string> {
  const r = await rt.run({ op: 'pull', sid: member, args: { limit: MAX_BATCH }, method: 'push', max_size: room });
  const data = (r.ok ? r.data : undefined) as
    | { messages: Array<{ framed: string }>; remaining: number; more_than_fits?: true; notice?: string }
    | undefined;
  if (!data) return '';
  // A hold's notice (the wake guard's, of OpenComms' own) goes before the mail it held.
  const batch = [data.notice, data.messages.map((m) => m.framed).join(BATCH_SEPARATOR)].filter(Boolean).join('\n\n');
  if (data.remaining > 0 && (batch || data.more_than_fits))
    return [batch, waitingLine(data.remaining)].filter(Boolean).join('\n\n');
  return batch;
}

const waitingLine = (n: number) =>
  `(OpenComms: ${n} more message(s) are waiting for you, beyond what this context can show whole. They arrive at the next turn boundary; to read them now, call opencomms_pull.)`;

/** The role blocks a SessionStart gives: all of them, except on a resume, where the blocks the
 *  session's transcript already holds were given before (once per session, not per resume). */
async function rolesToGive(rt: Runtime, ctx: HookContext, member: string): Promise<string[]> {
  const blocks = roleInstructions(await rt.peek(), member);
  if (ctx.input.source !== 'resume' || !blocks.length) return blocks;
  const transcript = await readWhole(ctx.input.transcript_path);
  // Transcripts are JSON lines: a block is stored with JSON's escapes.
  return blocks.filter((b) => !transcript.includes(JSON.stringify(b).slice(1, -1)));
}

async function boundary(rt: Runtime, ctx: HookContext, sid: string): Promise<HookOutput> {
  if (ctx.event === 'SessionEnd') {
    await rt.run({ op: 'session_end', session: sid });
    return {};
  }
  const { member, guidance } = await resolveOrBind(rt, ctx, sid);
  const out: HookOutput = guidance ? { systemMessage: guidance } : {};
  if (!member) return out;
  if (ctx.event === 'SessionStart' || ctx.event === 'UserPromptSubmit')
    await rt.run({ op: 'clear_stale', session: sid });
  await confirmWake(rt, ctx, member);
  await sweepDead(rt, member);
  if (ctx.event === 'Stop' && ctx.input.stop_hook_active === true) return out;

  if (ctx.event === 'Stop' && ctx.host === 'codex') {
    const n = readable(await rt.peek(), member, Date.now());
    return n ? { ...out, decision: 'block', reason: CODEX_STOP_NOTICE(n) } : out;
  }
  // A Codex wake's batch first (the launcher's fixed prompt; the batch waited in flight for this
  // turn), then what is pending, so the model reads the older mail first.
  const codexWoken =
    ctx.host === 'codex' && ctx.event === 'UserPromptSubmit' ? await handWokenBatch(rt, ctx.input.prompt, member) : '';
  const woken = ctx.event === 'UserPromptSubmit' && carriesMail(ctx.input.prompt);
  const roles = ctx.event === 'SessionStart' ? await rolesToGive(rt, ctx, member) : [];
  // The context holds the roles, a woken batch and what is pending, all within what the host
  // shows whole of a hook's context; the pending mail gets the room the others leave.
  const before = [...roles, codexWoken].filter(Boolean);
  // Less the longest joiner between them and the pending mail (a batch separator).
  const room = routeLimit(ctx.host, 'hook_context') - shownSize(before.join('\n\n')) - shownSize(BATCH_SEPARATOR);
  const pending = woken ? '' : await handOver(rt, member, room);
  const context = [...roles, [codexWoken, pending].filter(Boolean).join(BATCH_SEPARATOR)].filter(Boolean).join('\n\n');
  // Stop too answers with context, not `decision: block`: Claude Code renders a block's reason
  // twice in the model's request, additional context once (docs/hosts.md).
  return context ? { ...out, hookSpecificOutput: { hookEventName: ctx.event!, additionalContext: context } } : out;
}

/** `confirm` mode: the detached commit of a woken turn's batches (see hook-runner.ts). */
export async function confirmWoken(ctx: HookContext): Promise<number> {
  const sid = ctx.input.session_id;
  if (typeof sid !== 'string' || !sid) return 0;
  const rt = openRuntime(ctx.project, { log: () => {}, spawnHosts: SPAWN_HOSTS });
  try {
    const found = resolveMember(await rt.peek(), ctx.host, sid);
    if (found && 'member' in found) await confirmWake(rt, ctx, found.member);
  } finally {
    await rt.close();
  }
  return 0;
}

export async function handleHook(ctx: HookContext): Promise<HookOutput> {
  const sid = ctx.input.session_id;
  if (!ctx.event || typeof sid !== 'string' || !sid) return {};
  const rt = openRuntime(ctx.project, { log: () => {}, spawnHosts: SPAWN_HOSTS });
  try {
    return await boundary(rt, ctx, sid);
  } catch (e) {
    const message = `Hook runner (${ctx.host} ${ctx.event}) failed open: ${(e as Error).message ?? e}`;
    await rt.run({ op: 'record_error', entry: { at: Date.now(), message } }).catch(() => {});
    return {};
  } finally {
    await rt.close();
  }
}
