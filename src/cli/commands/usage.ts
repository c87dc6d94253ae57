// `opencomms usage [--channel <name>] [--json]` and `opencomms release <channel> [--member <role|id>]`
// (operator.md "Wakes and their cost"): what the channels cost, and the operator's word that
// lets the wakes the loop guard holds go again. The report is engine/usage.ts on a
// look at the state (a read: no lock); the release is the engine's `release_wakes`, as the operator.
import type { Command as EngineCommand } from '../../engine/index.ts';
import {
  type CostView,
  type MemberUsage,
  type UsageReport,
  type UsageSource,
  usageResult,
  WAKE_HOLD_LABEL,
} from '../../engine/usage.ts';
import { type Refusal, RefusalError, refuse, type ToolResult } from '../../protocol/result.ts';
import type { Runtime } from '../../runtime/runtime.ts';
import type { CliCommand } from '../command.ts';
import { answer, projectOf, withRuntime } from '../context.ts';

/** The cost report on a look at the state: the whole state (pending counts included), or, with
 *  `fromIndex`, what the session reads read (the store's sessions index, where it keeps one; no
 *  pending counts), so a roster read loads no more than it did. */
export async function readUsage(
  rt: Runtime,
  channel?: string,
  fromIndex = false,
): Promise<ToolResult<UsageReport> | Refusal> {
  try {
    const src: UsageSource = (fromIndex ? await rt.store.sessions?.() : null) ?? (await rt.peek());
    return usageResult(src, { channel }, rt.env().now);
  } catch (e) {
    if (e instanceof RefusalError) return e.refusal;
    throw e;
  }
}

/** `14:02:11 UTC`. */
export const utcClock = (ms: number) => `${new Date(ms).toISOString().slice(11, 19)} UTC`;
const utcMinute = (ms: number) => `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
const n = (x: number) => x.toLocaleString('en-US');

/** Wakes with their routes (a read that started no turn is `pull`, outside the wakes). */
export function costText(c: CostView): string {
  const routes = Object.entries(c.routes).filter(([r]) => r !== 'pull');
  const parts = [
    `${n(c.wakes)} wake${c.wakes === 1 ? '' : 's'}${routes.length ? ` (${routes.map(([r, k]) => `${r} ${n(k)}`).join(', ')})` : ''}`,
    ...(c.routes.pull ? [`${n(c.routes.pull)} read${c.routes.pull === 1 ? '' : 's'} (pull)`] : []),
    `${n(c.held)} held`,
    `${n(c.messages)} message${c.messages === 1 ? '' : 's'}`,
    `${n(c.size)} characters`,
    `~${n(c.tokens_estimate)} tokens (estimate)`,
  ];
  return parts.join(', ');
}

/** `held by the loop guard since 14:02:11 UTC (7 pending)`, or null when its wakes go. */
export function holdText(m: Pick<MemberUsage, 'hold'>): string | null {
  const h = m.hold;
  if (!h.held_by) return null;
  const since = h.held_since === null ? '' : ` since ${utcClock(h.held_since)}`;
  const pending = h.pending === null ? '' : ` (${h.pending} pending)`;
  return `wakes held by the ${WAKE_HOLD_LABEL[h.held_by]}${since}${pending}`;
}

export const budgetText = (b: { used: number; budget: number | null; next_free_at: number | null }) =>
  b.budget === null
    ? 'none'
    : `${b.used}/${b.budget} wakes in the last hour${b.next_free_at !== null ? `, spent until ${utcClock(b.next_free_at)}` : ''}`;

/** What `status` and `members` add to a member row: its hold, its wake budget use and its cost. */
export type CostFields = Pick<MemberUsage, 'hold' | 'wake_budget' | 'usage'>;

/** A read's member rows of one channel with the report's fields for each (a row the report does
 *  not know, as it is). */
export function withCosts<M extends { session_id: string }>(
  report: UsageReport | null,
  channelId: string,
  rows: readonly M[],
): Array<M & Partial<CostFields>> {
  const c = report?.channels.find((x) => x.channel_id === channelId);
  return rows.map((m) => {
    const u = c?.members.find((x) => x.session_id === m.session_id);
    return u ? { ...m, hold: u.hold, wake_budget: u.wake_budget, usage: u.usage } : m;
  });
}

/** What `status` and `members` add under a member: its hold, its last hour and its wake budget;
 *  null for a member that has cost nothing and is not held. */
export function memberCostLine(m: Partial<CostFields>): string | null {
  if (!m.hold || !m.wake_budget || !m.usage) return null;
  const held = holdText({ hold: m.hold });
  if (!held && m.usage.total.wakes + m.usage.total.messages + m.usage.total.held === 0) return null;
  return [held, `last hour: ${costText(m.usage.hour)}`, `wake budget ${budgetText(m.wake_budget)}`]
    .filter(Boolean)
    .join('; ');
}

/** The terminal view of the report: per channel, its sums and each member's. */
export function renderUsage(r: UsageReport): string {
  const lines = [
    `Windows: last hour (since ${utcMinute(r.windows.hour.since)}), last day (since ${utcMinute(r.windows.day.since)}), since the channel began; whole ${r.bucket_ms / 60_000}-minute buckets.`,
    `Tokens are an estimate: ${r.token_estimate.rule} of the characters shown to the model.`,
  ];
  if (!r.channels.length) return [...lines, 'No live channels in this project.'].join('\n');
  const windows = (u: MemberUsage['usage']) => [
    `    last hour  ${costText(u.hour)}`,
    `    last day   ${costText(u.day)}`,
    `    total      ${costText(u.total)}`,
  ];
  for (const c of r.channels) {
    lines.push(`${c.name}: wake budget ${budgetText(c.wake_budget)} (channel)`, ...windows(c.usage));
    for (const m of c.members) {
      const who = m.role ?? `${m.session_id} (left the channel)`;
      lines.push(
        `  ${who}: ${holdText(m) ?? 'wakes go'}; wake budget ${budgetText(m.wake_budget)}`,
        ...windows(m.usage),
      );
    }
  }
  return lines.join('\n');
}

/** A wake budget as typed: a whole number, or `none`. */
export function budgetArg(raw: string | undefined, flag: string): number | null | undefined {
  if (raw === undefined) return undefined;
  const v = raw.trim().toLowerCase();
  if (v === 'none') return null;
  if (/^[0-9]+$/.test(v)) return Number(v);
  throw new RefusalError(
    refuse('invalid_argument', `${flag} takes a whole number of wakes per hour, or "none": "${raw}" is neither.`),
  );
}

/** The engine's operator operations of the wake guard. */
export const releaseCommand = (channel: string, member?: string): EngineCommand => ({
  op: 'release_wakes',
  args: { channel, ...(member === undefined ? {} : { member }) },
});

export const budgetCommand = (
  channel: string,
  budgets: { max_wakes_per_member?: number | null; max_wakes_per_channel?: number | null },
): EngineCommand => ({ op: 'set_wake_budget', args: { channel, ...budgets } });

export const usageCommands: CliCommand = {
  register(program, ctx) {
    program
      .command('usage')
      .description(
        'what each channel and member cost: wakes by route, held wakes, messages, characters, a token estimate',
      )
      .option('--channel <name>', 'only this channel')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { channel?: string; json?: boolean }, cmd) => {
        const r = await withRuntime(projectOf(cmd), (rt) => readUsage(rt, o.channel));
        ctx.exit(answer(ctx.io, r, o.json, renderUsage));
      });
    program
      .command('release <channel>')
      .description('let the wakes the loop guard holds go again (every member, or one)')
      .option('--member <member>', 'one member, by role or session id')
      .option('--json', 'one {ok, message, data} document')
      .action(async (channel: string, o: { member?: string; json?: boolean }, cmd) => {
        const r = await withRuntime(projectOf(cmd), (rt) => rt.run(releaseCommand(channel, o.member)));
        ctx.exit(answer(ctx.io, r, o.json, () => r.message));
      });
  },
};
