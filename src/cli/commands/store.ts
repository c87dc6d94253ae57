// `opencomms store init|status|grant` (docs/postgres.md): which store holds the project. The
// binding names a server and a project key, never a password; `grant` prints the SQL that gives
// one database role one project and nothing else.
import type { Command } from 'commander';
import { ok, refuse, RefusalError, type ToolResult } from '../../protocol/result.ts';
import { readBinding, writeBinding } from '../../store/binding.ts';
import { describeUrl } from '../../store/postgres/connect.ts';
import { type Moved, moveToFiles, moveToPostgres } from '../../store/move.ts';
import { ident, schemaOf } from '../../store/postgres/schema.ts';
import { PgStore, type PgStatus } from '../../store/postgres/store.ts';
import type { CliCommand } from '../command.ts';
import type { CliContext } from '../context.ts';
import { answer, projectOf } from '../context.ts';

const asResult = async (fn: () => Promise<ToolResult<object>>): Promise<ToolResult<object>> => {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof RefusalError) return e.refusal;
    throw e;
  }
};

async function status(project: string): Promise<ToolResult<object>> {
  const b = readBinding(project);
  if (b.kind === 'file') return ok('Store: files under .opencomms/ (the default).', { store: 'file' });
  const store = new PgStore({ url: b.url, key: b.key });
  try {
    const s: PgStatus = await store.status();
    const where = describeUrl(b.url);
    return ok(
      `Store: PostgreSQL ${s.server_version} at ${where}, project key ${b.key}\nHead: change ${s.head} (this process ${s.lag} behind; a cold start replays ${s.cold_start_changes})\nConnections of OpenComms to the database: ${s.connections}`,
      { store: 'postgres', server: where, key: b.key, ...s },
    );
  } finally {
    await store.close();
  }
}

/** Installed hosts pass the password's variables to their MCP servers only once installed for a bound project. */
const REINSTALL =
  "Hosts installed here before: run `opencomms install` again, so that their MCP servers take the password from the session's PGPASSWORD or PGPASSFILE.";

async function migrate(project: string, to: string, key: string | undefined): Promise<ToolResult<object>> {
  const counts = (m: Moved) =>
    `${m.channels} channel(s), ${m.messages} live message(s), ${m.history} history entries and ${m.archives} archive(s)`;
  if (to === 'file') {
    const from = readBinding(project);
    const m = await moveToFiles(project);
    const where = from.kind === 'postgres' ? `${describeUrl(from.url)}, project key ${from.key}` : '';
    const aside = m.set_aside ? ` The files the binding had retired are kept in ${m.set_aside}.` : '';
    return ok(
      `Moved ${counts(m)} from ${where} into the files of this folder; the PostgreSQL project is retired (every process still using it refuses) and this folder is on the file store again.${aside} Restart running OpenComms processes of this project.`,
      { ...m, store: 'file', from: where },
    );
  }
  if (!key) return refuse('invalid_argument', 'Moving to PostgreSQL needs the project key: pass --key <project-key>.');
  const m = await moveToPostgres(project, to, key);
  return ok(
    `Moved ${counts(m)} to ${describeUrl(to)}, project key ${key}; this project is now bound there. Restart running OpenComms processes of this project. ${REINSTALL}`,
    { ...m, server: describeUrl(to), key },
  );
}

const ROLE_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/** The SQL an administrator runs to give `role` the project `key` and nothing else: the role
 *  owns the project's schema; every other project's schema is another role's. */
export function grantSql(key: string, role: string): string {
  const schema = ident(schemaOf(key));
  if (!ROLE_RE.test(role))
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `"${role}" is not a role name here: use 1-63 of a-z, 0-9 and _ (starting with a letter or _).`,
      ),
    );
  const r = `"${role}"`;
  return [
    `-- Run as an administrator of the database. Set the password with \\password ${role} (never in a file of the project).`,
    `create role ${r} login;`,
    `create schema if not exists ${schema} authorization ${r};`,
    `alter schema ${schema} owner to ${r};`,
    `revoke create on schema public from public;`,
    '',
  ].join('\n');
}

export const store: CliCommand = {
  register(program: Command, ctx: CliContext) {
    const group = program
      .command('store')
      .description('which store holds this project (files, or PostgreSQL for several machines)');
    group
      .command('init <url>')
      .description('bind this project to a PostgreSQL project key (no password is recorded)')
      .requiredOption('--key <project-key>', 'the project key, the same on every machine')
      .option('--json', 'one {ok, message, data} document')
      .action(async (url: string, o: { key: string; json?: boolean }, cmd: Command) => {
        const project = projectOf(cmd);
        const r = await asResult(async () => {
          await writeBinding(project, url, o.key);
          return ok(
            `This project is now bound to ${describeUrl(url)}, project key ${o.key} (.opencomms/store.json). ${REINSTALL}`,
            {
              store: 'postgres',
              server: describeUrl(url),
              key: o.key,
            },
          );
        });
        ctx.exit(answer(ctx.io, r, o.json, () => r.message));
      });
    group
      .command('migrate')
      .description(
        'move this project (state, history, archives) between its files and PostgreSQL; the old copy is retired',
      )
      .requiredOption(
        '--to <url|file>',
        'the PostgreSQL URL (no password in it), or `file` for the files of this folder',
      )
      .option('--key <project-key>', 'with a URL: the project key, which must not hold a project yet')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { to: string; key?: string; json?: boolean }, cmd: Command) => {
        const r = await asResult(() => migrate(projectOf(cmd), o.to, o.key));
        ctx.exit(answer(ctx.io, r, o.json, () => r.message));
      });
    group
      .command('status')
      .description('the store, its project key, server version, lag and connections')
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { json?: boolean }, cmd: Command) => {
        const r = await asResult(() => status(projectOf(cmd)));
        ctx.exit(answer(ctx.io, r, o.json, () => r.message));
      });
    group
      .command('grant')
      .description('print the SQL that gives one database role this project and nothing else')
      .requiredOption('--role <name>', 'the database role to create')
      .option('--key <project-key>', 'the project key (default: the bound one)')
      .action(async (o: { role: string; key?: string }, cmd: Command) => {
        const r = await asResult(async () => {
          const b = readBinding(projectOf(cmd));
          const key = o.key ?? (b.kind === 'postgres' ? b.key : null);
          if (!key)
            return refuse('invalid_argument', 'This project is not bound to PostgreSQL: pass --key <project-key>.');
          return ok(grantSql(key, o.role));
        });
        ctx.exit(answer(ctx.io, r, false, () => r.message));
      });
  },
};
