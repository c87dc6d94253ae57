// The hook runner's full path (FEATURES.md §8.2), loaded only when the fast path saw work: bind the
// session, clear a stale mark, confirm a wake the woken turn shows, sweep the batches of dead
// processes, and hand pending mail over at this boundary (drain + commit in ONE locked mutation,
// `delivery_method: push`). Fail-open: any fault answers `{}` and is recorded when the state is writable.
import { open } from 'node:fs/promises';
import { BATCH_SEPARATOR } from '../../src/framing.ts';
import { MAX_BATCH } from '../../src/protocol/limits.ts';
import { roleInstructions } from '../../src/engine/roles.ts';
import { openRuntime, processAlive, processTag, type Runtime } from '../../src/runtime/runtime.ts';
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

/** The envelope ids a frame header names (`| id: ocm_… |`), as framing.ts writes them. */
const idMark = (id: string) => `| id: ${id} |`;

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
  const held = Object.values(state.messages).filter((e) => e.recipient_session_id === member && e.delivery_status === 'in_flight' && e.in_flight_by === tag);
  if (!held.length) return;
  let seen = ctx.input.prompt ?? '';
  if (!held.every((e) => seen.includes(idMark(e.message_id)))) seen += await transcriptTail(ctx.input.transcript_path);
  const shown = held.filter((e) => seen.includes(idMark(e.message_id)));
  // Committed under the hold the waiter drained them with: a batch swept and handed over again
  // meanwhile is fenced, not committed twice.
  if (shown.length)
    await rt.run({ op: 'commit', rid: member, message_ids: shown.map((e) => e.message_id), method: 'push', held: { by: tag, attempts: shown.map((e) => e.attempts) } });
}

/** Batches in flight under processes that are gone (a killed host, a crashed server) go back to
 *  the queue before this boundary reads it. */
async function sweepDead(rt: Runtime, member: string): Promise<void> {
  const state = await rt.peek();
  const dead = Object.values(state.messages).some((e) => e.recipient_session_id === member && e.delivery_status === 'in_flight' && (!e.in_flight_by || !processAlive(e.in_flight_by)));
  if (dead) await rt.run({ op: 'sweep', alive: processAlive });
}

async function boundary(rt: Runtime, ctx: HookContext, sid: string): Promise<HookOutput> {
  if (ctx.event === 'SessionEnd') {
    await rt.run({ op: 'mark_stale', session: sid });
    return {};
  }
  const { member, guidance } = await resolveOrBind(rt, ctx, sid);
  const out: HookOutput = guidance ? { systemMessage: guidance } : {};
  if (!member) return out;
  if (ctx.event === 'SessionStart' || ctx.event === 'UserPromptSubmit') await rt.run({ op: 'clear_stale', session: sid });
  await confirmWake(rt, ctx, member);
  await sweepDead(rt, member);
  if (ctx.event === 'Stop' && ctx.input.stop_hook_active === true) return out;

  const r = await rt.run({ op: 'pull', sid: member, args: { limit: MAX_BATCH }, method: 'push' });
  const data = (r.ok ? r.data : undefined) as { messages: Array<{ framed: string }>; remaining: number } | undefined;
  let batch = (data?.messages ?? []).map((m) => m.framed).join(BATCH_SEPARATOR);
  if (batch && data!.remaining > 0) batch += `\n\n(${data!.remaining} more OpenComms message(s) are waiting: they arrive at the next turn boundary, or call opencomms_pull.)`;
  if (ctx.event === 'Stop') return batch ? { ...out, decision: 'block', reason: batch } : out;
  const parts = ctx.event === 'SessionStart' ? [...roleInstructions(await rt.peek(), member), batch] : [batch];
  const context = parts.filter(Boolean).join('\n\n');
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
