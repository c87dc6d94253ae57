// `opencomms status [--json]` (operator.md "Command line"): the operator's view of every live channel.
import type { StatusReport } from '../../engine/reads.ts';
import { VERSION } from '../../version.ts';
import { migrationMarker } from '../../doctor/files.ts';
import type { CliCommand } from '../command.ts';
import { answer, projectOf, withRuntime } from '../context.ts';

/** Errors shown in the text view, each cut to ERROR_CHARS: a glance, not the log. */
const ERRORS_SHOWN = 5;
const ERROR_CHARS = 140;

export function renderStatus(project: string, d: StatusReport, migratedAt: string | null): string {
  const lines = [`OpenComms ${VERSION} - project ${project}`, 'State schema: v2 at .opencomms/state.json'];
  if (migratedAt)
    lines.push(
      `Migrated from .opencode-comms/state.json (schema 1) at ${migratedAt}; the legacy file was left in place.`,
    );
  lines.push(`${d.channels.length} channel(s), ${d.total_messages} message(s), ${d.pending_messages} pending`);
  for (const c of d.channels) {
    lines.push(`${c.name}${c.paused ? ' [PAUSED]' : ''}`);
    for (const m of c.members)
      lines.push(`  ${m.role} (${m.host}, delivery: ${m.delivery_mode})${m.stale ? ' [STALE]' : ''}`);
  }
  for (const e of d.errors.slice(-ERRORS_SHOWN)) lines.push(`error: ${e.message.slice(0, ERROR_CHARS)}`);
  return `${lines.join('\n')}\n`;
}

export const status: CliCommand = {
  register(program, ctx) {
    program
      .command('status')
      .description('every channel, member, pending count and recent error (operator view)')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { json?: boolean }, cmd) => {
        const project = projectOf(cmd);
        const r = await withRuntime(project, (rt) => rt.run({ op: 'operator_status' }));
        const marker = await migrationMarker(project);
        ctx.exit(answer(ctx.io, r, o.json, (d: StatusReport) => renderStatus(project, d, marker)));
      });
  },
};
