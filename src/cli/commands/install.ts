// The host commands (hosts.md "OpenCode", "Installers"; operator.md "Command line"): `install <host>`, `uninstall <host>`,
// `install-member`, `bind`. The work is in ../hosts.ts (loaded when one of them runs); this module
// only declares them to the parser and prints their answer.
import type { CliCommand } from '../command.ts';
import { answer, projectOf } from '../context.ts';
import type { CommandResult } from '../hosts.ts';

const hosts = () => import('../hosts.ts');

export const install: CliCommand = {
  register(program, ctx) {
    const done = async (p: Promise<CommandResult>, json: boolean | undefined) => {
      const { result } = await p;
      ctx.exit(answer(ctx.io, result, json, () => result.message));
    };
    const warn = (l: string) => ctx.io.err(`warning: ${l}\n`);
    program
      .command('install [host]')
      .description(
        'install the integration for a host: opencode | claude-code | codex (claude-desktop prints its manual config; chatgpt is not installable); ' +
          'with no host, every host found in the project or on the PATH, each with a pinned member',
      )
      .option('--json', 'one {ok, message, data} document')
      .action(async (host: string | undefined, o: { json?: boolean }, cmd) => {
        const h = await hosts();
        const project = projectOf(cmd, ctx.io);
        return done(host === undefined ? h.installAll(project, { warn }) : h.install(host, project, { warn }), o.json);
      });
    program
      .command('uninstall [host]')
      .description(
        'remove only what install added (state, pins and archives stay): opencode | claude-code | codex; with no host, all three',
      )
      .option('--json', 'one {ok, message, data} document')
      .action(async (host: string | undefined, o: { json?: boolean }, cmd) => {
        const h = await hosts();
        const project = projectOf(cmd, ctx.io);
        return done(host === undefined ? h.uninstallAll(project) : h.uninstall(host, project), o.json);
      });
    program
      .command('install-member')
      .description("pin a member id for a host (default claude-code) and fill its MCP config's placeholder")
      .option('--host <label>', 'the host the member runs in', 'claude-code')
      .option('--id <member_id>', 'the member id (default: a new sess_ id)')
      .option('--name <member_id>', 'alias of --id')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { host?: string; id?: string; name?: string; json?: boolean }, cmd) =>
        done((await hosts()).installMember(projectOf(cmd, ctx.io), { host: o.host, id: o.id ?? o.name }), o.json),
      );
    program
      .command('bind')
      .description(
        'bind a host session (default codex: its thread id) to a pinned member, so spawn_push can continue it',
      )
      .requiredOption('--session <id>', "the host's own session or thread id")
      .option('--host <label>', 'the host', 'codex')
      .option('--id <member_id>', 'the member (default: the only pinned member of that host)')
      .option('--name <member_id>', 'alias of --id')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { host?: string; session: string; id?: string; name?: string; json?: boolean }, cmd) =>
        done(
          (await hosts()).bindSession(projectOf(cmd, ctx.io), { host: o.host, session: o.session, id: o.id ?? o.name }),
          o.json,
        ),
      );
  },
};
