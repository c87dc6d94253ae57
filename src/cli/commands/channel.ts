// `opencomms channel list|get|create|save|delete|restore` (operator.md "Command line"; protocol.md "Timer, kick, saved channels"): the operator's
// channel lifecycle. Every change is one engine operation through the runtime, as the operator
// (project id `cli-local-project`, worktree = the project).
import type { Command } from 'commander';
import type { ArchiveCard, LiveCard, SessionDetail } from '../../engine/operator.ts';
import type { UsageReport } from '../../engine/usage.ts';
import { refuse } from '../../protocol/result.ts';
import type { CliCommand } from '../command.ts';
import { answer, cliOperator, counted, projectOf, withRuntime, type CliContext } from '../context.ts';
import { budgetArg, budgetCommand, budgetText, readUsage } from './usage.ts';

const NO_DESCRIPTION = 'No description yet';
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export function renderChannelList(d: { live: LiveCard[]; archived: ArchiveCard[] }): string {
  const lines = [
    ...d.live.map(
      (c) =>
        `${c.name} [${c.lifecycle}${c.paused ? ', paused' : ''}] ${c.agents.length}/${c.max_members} agents — ${c.description ?? NO_DESCRIPTION}`,
    ),
    ...d.archived.map(
      (a) =>
        `${a.name} [saved ${day(a.saved_at)}] ${counted(a.message_count, 'message')} — ${a.description ?? NO_DESCRIPTION}`,
    ),
  ];
  return lines.length ? lines.join('\n') : 'No channels yet. Create one with `opencomms channel create <name>`.';
}

export function renderChannelDetail(d: SessionDetail): string {
  if (d.kind === 'live') {
    const head = `${d.name} [active${d.paused ? ', paused' : ''}] ${d.agents.length}/${d.max_members} agents — ${d.description ?? NO_DESCRIPTION}`;
    const rows = d.agents.map(
      (m) => `${m.session_id} | ${m.role} | ${m.host} | ${m.delivery_mode}${m.stale ? ' | STALE' : ''}`,
    );
    return [head, ...(rows.length ? rows : [`(no agents yet: see \`opencomms join-command ${d.name}\`)`])].join('\n');
  }
  return [
    `${d.name} [saved ${day(d.saved_at)}] ${counted(d.message_count, 'message')} — ${d.description ?? NO_DESCRIPTION}`,
    `archive: ${d.archive_id}`,
    `roles: ${d.agents.map((a) => a.role).join(', ') || '(none)'}`,
    `summary: ${d.summary}`,
    `restore it with: opencomms channel restore ${d.name}`,
  ].join('\n');
}

const json = (c: Command) => c.option('--json', 'one {ok, message, data} document');

function register(program: Command, ctx: CliContext) {
  const channel = program
    .command('channel')
    .description('list, inspect, create, save, delete and restore channels, and set their wake budgets');

  json(channel.command('list').description('live channels and every saved one')).action(
    async (o: { json?: boolean }, cmd: Command) => {
      const r = await withRuntime(projectOf(cmd), (rt) => rt.run({ op: 'session_list' }));
      ctx.exit(answer(ctx.io, r, o.json, renderChannelList));
    },
  );

  json(channel.command('get <name>').description("a live channel's roster, or a saved channel's archive")).action(
    async (name: string, o: { json?: boolean }, cmd: Command) => {
      const r = await withRuntime(projectOf(cmd), (rt) => rt.run({ op: 'session_get', args: { channel: name } }));
      ctx.exit(answer(ctx.io, r, o.json, renderChannelDetail));
    },
  );

  json(
    channel
      .command('create <name>')
      .description('an empty active channel agents then join')
      .option('--max-members <n>', 'members at most (2..32, default 8)'),
  ).action(async (name: string, o: { json?: boolean; maxMembers?: string }, cmd: Command) => {
    const project = projectOf(cmd);
    const r = await withRuntime(project, (rt) =>
      rt.run({ op: 'create_session', actor: cliOperator(project), args: { channel: name, max_members: o.maxMembers } }),
    );
    ctx.exit(
      answer(
        ctx.io,
        r,
        o.json,
        (d: { name: string }) => `${r.message}\nJoin commands: opencomms join-command ${d.name} --host <host>`,
      ),
    );
  });

  json(
    channel
      .command('save <name>')
      .description('archive a live channel (its mail is archived, not delivered)')
      .option('--summary <text>', 'what the archive says (≤2000 chars)'),
  ).action(async (name: string, o: { json?: boolean; summary?: string }, cmd: Command) => {
    const project = projectOf(cmd);
    const r = await withRuntime(project, (rt) =>
      rt.run({ op: 'save_session', actor: cliOperator(project), args: { channel: name, summary: o.summary } }),
    );
    ctx.exit(
      answer(
        ctx.io,
        r,
        o.json,
        (d: { message_count: number }) =>
          `Saved "${name}": ${d.message_count} message(s) archived.\nRestore it with: opencomms channel restore ${name.trim().toLowerCase()}`,
      ),
    );
  });

  json(
    channel
      .command('delete <name>')
      .description('delete a live channel or a saved one (permanent)')
      .option('--confirm', 'required: deletion is permanent'),
  ).action(async (name: string, o: { json?: boolean; confirm?: boolean }, cmd: Command) => {
    const project = projectOf(cmd);
    const r = await withRuntime(project, async (rt) => {
      // What the deletion removes depends on what the name is: a live channel's mail, or a saved one's archive.
      const found = await rt.run({ op: 'session_get', args: { channel: name } });
      if (!found.ok) return found;
      if (!o.confirm)
        return refuse(
          'confirm_required',
          (found.data as SessionDetail).kind === 'live'
            ? `Deleting the live channel "${(found.data as SessionDetail).name}" is permanent: its members and undelivered mail are discarded. Repeat with --confirm.`
            : `Deleting the saved channel "${(found.data as SessionDetail).name}" is permanent: its archive and history are removed. Repeat with --confirm.`,
        );
      return rt.run({
        op: 'delete_session',
        actor: cliOperator(project),
        args: { channel: name, confirm: true },
        archive: null,
      });
    });
    ctx.exit(answer(ctx.io, r, o.json, () => r.message));
  });

  json(
    channel
      .command('restore <name>')
      .description('a new empty channel from a saved one')
      .option('--as <new-name>', 'the new channel name (default: the ladder name, name-r2 …)'),
  ).action(async (name: string, o: { json?: boolean; as?: string }, cmd: Command) => {
    const project = projectOf(cmd);
    const r = await withRuntime(project, (rt) =>
      rt.run({
        op: 'resume_session',
        actor: cliOperator(project),
        args: { channel: name, new_name: o.as },
        archive: null,
      }),
    );
    ctx.exit(
      answer(
        ctx.io,
        r,
        o.json,
        (d: { name: string }) =>
          `Restored "${name}" as new channel "${d.name}".\nJoin commands: opencomms join-command ${d.name} --host <host>`,
      ),
    );
  });

  // The wake budgets (operator.md "Wakes and their cost"): without an option, what they
  // are and how much of them the last hour used.
  json(
    channel
      .command('budget <channel>')
      .description("a channel's wake budgets per hour: per member and for the whole channel")
      .option('--wakes-per-member <n>', 'wakes one member may be given per hour, or "none"')
      .option('--wakes-per-channel <n>', 'wakes the whole channel may start per hour, or "none"'),
  ).action(
    async (name: string, o: { json?: boolean; wakesPerMember?: string; wakesPerChannel?: string }, cmd: Command) => {
      const project = projectOf(cmd);
      const perMember = budgetArg(o.wakesPerMember, '--wakes-per-member');
      const perChannel = budgetArg(o.wakesPerChannel, '--wakes-per-channel');
      if (perMember === undefined && perChannel === undefined) {
        const r = await withRuntime(project, (rt) => readUsage(rt, name));
        ctx.exit(
          answer(ctx.io, r, o.json, (d: UsageReport) => {
            const c = d.channels[0]!;
            return [
              `${c.name}: wake budget ${budgetText(c.wake_budget)} (channel)`,
              ...c.members.filter((m) => m.member).map((m) => `  ${m.role}: wake budget ${budgetText(m.wake_budget)}`),
            ].join('\n');
          }),
        );
        return;
      }
      const budgets = {
        ...(perMember === undefined ? {} : { max_wakes_per_member: perMember }),
        ...(perChannel === undefined ? {} : { max_wakes_per_channel: perChannel }),
      };
      const r = await withRuntime(project, (rt) => rt.run(budgetCommand(name, budgets)));
      ctx.exit(answer(ctx.io, r, o.json, () => r.message));
    },
  );
}

export const channel: CliCommand = { register };
