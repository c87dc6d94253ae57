// `opencomms status [--json]` (operator.md "Command line"): the operator's view of every live channel.
import type { StatusReport } from '../../engine/reads.ts';
import type { UsageReport } from '../../engine/usage.ts';
import type { ToolResult } from '../../protocol/result.ts';
import {
  MACHINE_ID_SHOWN,
  machineLabel,
  placed,
  placeStatus,
  renderPlace,
  type MemberPlace,
  type ProcessPlace,
} from '../../runtime/placement.ts';
import { VERSION } from '../../version.ts';
import { SCHEMA_VERSION } from '../../protocol/limits.ts';
import { migrationMarker } from '../../doctor/files.ts';
import { type Binding, readBinding } from '../../store/binding.ts';
import { describeUrl } from '../../store/postgres/connect.ts';
import type { CliCommand } from '../command.ts';
import { answer, projectOf, withRuntime } from '../context.ts';
import { type CostFields, memberCostLine, readUsage, withCosts } from './usage.ts';

/** Errors shown in the text view, each cut to ERROR_CHARS: a glance, not the log. */
const ERRORS_SHOWN = 5;
const ERROR_CHARS = 140;

/** The status data with places (placement.ts): each member's machine and lease, and the processes. */
export type PlacedStatus = Omit<StatusReport, 'channels'> & {
  channels: Array<
    Omit<StatusReport['channels'][number], 'members'> & {
      members: Array<StatusReport['channels'][number]['members'][number] & Partial<MemberPlace> & Partial<CostFields>>;
    }
  >;
  machine?: string;
  processes?: ProcessPlace[] | null;
};

const renderProcess = (p: ProcessPlace) =>
  `  pid ${p.pid} on computer ${machineLabel(p.machine, p.machine_name)}${p.this_machine ? ', this computer' : ''}: lease ${p.lease} (${Math.abs(Math.round(p.expires_in_ms / 1000))} s ${p.expires_in_ms >= 0 ? 'left' : 'ago'})`;

/** Where the state lives: the files, or the server and project key of the binding. */
const storeLine = (b: Binding) =>
  `State schema: v${SCHEMA_VERSION} ${b.kind === 'postgres' ? `in PostgreSQL at ${describeUrl(b.url)}, project key ${b.key}` : 'at .opencomms/state.json'}`;

export function renderStatus(project: string, d: PlacedStatus, migratedAt: string | null, binding: Binding): string {
  const lines = [`OpenComms ${VERSION} - project ${project}`, storeLine(binding)];
  if (migratedAt)
    lines.push(
      `Migrated from .opencode-comms/state.json (schema 1) at ${migratedAt}; the legacy file was left in place.`,
    );
  lines.push(`${d.channels.length} channel(s), ${d.total_messages} message(s), ${d.pending_messages} pending`);
  for (const c of d.channels) {
    lines.push(`${c.name}${c.paused ? ' [PAUSED]' : ''}`);
    for (const m of c.members) {
      lines.push(
        `  ${m.role} (${m.host}, delivery: ${m.delivery_mode}${m.lease ? `, ${renderPlace(m as MemberPlace)}` : ''})${m.stale ? ' [STALE]' : ''}`,
      );
      // Its wake hold and what it cost (usage.ts), when it is held or cost anything.
      const cost = memberCostLine(m);
      if (cost) lines.push(`    ${cost}`);
    }
  }
  if (d.machine) lines.push(`This computer: ${d.machine.slice(0, MACHINE_ID_SHOWN)}`);
  if (d.processes) {
    lines.push(`${d.processes.length} process(es) with a lease:`);
    lines.push(...d.processes.map(renderProcess));
  }
  for (const e of d.errors.slice(-ERRORS_SHOWN)) lines.push(`error: ${e.message.slice(0, ERROR_CHARS)}`);
  return `${lines.join('\n')}\n`;
}

/** The status with each member's hold, wake budget use and cost (the cost report, usage.ts). */
function withUsage(r: ToolResult, u: Awaited<ReturnType<typeof readUsage>>): ToolResult {
  if (!u.ok) return r;
  const d = r.data as PlacedStatus;
  const report = u.data as UsageReport;
  return {
    ...r,
    data: { ...d, channels: d.channels.map((c) => ({ ...c, members: withCosts(report, c.channel_id, c.members) })) },
  };
}

export const status: CliCommand = {
  register(program, ctx) {
    program
      .command('status')
      .description('every channel, member, pending count and recent error (operator view)')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { json?: boolean }, cmd) => {
        const project = projectOf(cmd);
        const r = await withRuntime(project, async (rt) => {
          const r = await placed(rt.store, rt.machine, await rt.run({ op: 'operator_status' }), placeStatus);
          return r.ok ? withUsage(r, await readUsage(rt)) : r;
        });
        const marker = await migrationMarker(project);
        // The runtime opened the same binding, so it reads here as it did there.
        ctx.exit(
          answer(ctx.io, r, o.json, (d: PlacedStatus) => renderStatus(project, d, marker, readBinding(project))),
        );
      });
  },
};
