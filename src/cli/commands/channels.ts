// `opencomms channels [--json]` and `opencomms members <channel> [--json]` (operator.md "Command line"):
// the live channels, and one channel's roster.
import type { LiveCard, SessionDetail } from '../../engine/operator.ts';
import type { UsageReport } from '../../engine/usage.ts';
import { refuse, type ToolResult } from '../../protocol/result.ts';
import { machineLabel, placed, placeSession, type MemberPlace } from '../../runtime/placement.ts';
import type { CliCommand } from '../command.ts';
import { answer, counted, projectOf, withRuntime } from '../context.ts';
import { type CostFields, memberCostLine, readUsage, withCosts } from './usage.ts';

export const renderChannels = (live: LiveCard[]) =>
  live.length
    ? live.map((c) => `${c.name}${c.paused ? ' [paused]' : ''} (${counted(c.agents.length, 'member')})`).join('\n')
    : 'No live channels in this project. Create one with `opencomms channel create <name>`.';

type PlacedAgent = SessionDetail['agents'][number] & Partial<MemberPlace> & Partial<CostFields>;

/** Its wake hold and what it cost, on a line of its own (usage.ts), when it is held or cost anything. */
const costLine = (m: PlacedAgent) => {
  const line = memberCostLine(m);
  return line ? `\n  ${line}` : '';
};

export const renderMembers = (d: SessionDetail) =>
  d.agents.length
    ? d.agents
        .map(
          (m: PlacedAgent) =>
            `${m.role}: host=${m.host} surface=${m.surface} delivery=${m.delivery_mode}${m.lease ? ` computer=${machineLabel(m.machine ?? null, m.machine_name ?? null)}${m.this_machine ? '(this)' : ''} lease=${m.lease}` : ''}${m.stale ? ' [STALE]' : ''}${costLine(m)}`,
        )
        .join('\n')
    : `"${d.name}" has no members yet.`;

/** A live roster with each agent's hold, wake budget use and cost, read from what the roster read
 *  reads (the sessions index: no pending counts). */
function withAgentCosts(r: ToolResult, u: Awaited<ReturnType<typeof readUsage>> | null): ToolResult {
  const d = r.data as (SessionDetail & { channel_id?: string }) | undefined;
  if (!r.ok || !u?.ok || d?.kind !== 'live') return r;
  return { ...r, data: { ...d, agents: withCosts(u.data as UsageReport, d.channel_id, d.agents) } };
}

export const channels: CliCommand = {
  register(program, ctx) {
    program
      .command('channels')
      .description('the live channels, with member counts')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { json?: boolean }, cmd) => {
        const r = await withRuntime(projectOf(cmd), (rt) => rt.run({ op: 'session_list' }));
        ctx.exit(answer(ctx.io, r, o.json, (d: { live: LiveCard[] }) => renderChannels(d.live)));
      });
    program
      .command('members <channel>')
      .description("one live channel's members")
      .option('--json', 'one {ok, message, data} document')
      .action(async (channel: string, o: { json?: boolean }, cmd) => {
        const r = await withRuntime(projectOf(cmd), async (rt) => {
          const r = await placed(
            rt.store,
            rt.machine,
            await rt.run({ op: 'session_get', args: { channel } }),
            placeSession,
          );
          return withAgentCosts(r, await readUsage(rt, channel, true));
        });
        // members lists a live roster only: a saved channel's archive is `channel get`.
        const live = r.ok && (r.data as SessionDetail).kind === 'live';
        const out =
          r.ok && !live
            ? refuse(
                'lifecycle_refused',
                `"${channel}" is a saved channel, not a live one: see \`opencomms channel get ${channel}\`, or restore it.`,
                { lifecycle: 'saved' },
              )
            : r;
        ctx.exit(answer(ctx.io, out, o.json, renderMembers));
      });
  },
};
