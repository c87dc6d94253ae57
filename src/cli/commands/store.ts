// `opencomms store init|status|grant` (docs/postgres.md): which store holds the project. The
// binding names a server and a project key, never a password; `grant` prints the SQL that gives
// one database role one project and nothing else.
import type { Command } from 'commander';
import { ok, refuse, RefusalError, type ToolResult } from '../../protocol/result.ts';
import { readBinding, writeBinding } from '../../store/binding.ts';
import { existsSync } from 'node:fs';
import { listArchives } from '../../store/file/archives.ts';
import { withLock } from '../../store/file/lock.ts';
import { FileStore } from '../../store/file/store.ts';
import { resolvePaths, type StorePaths } from '../../store/paths.ts';
import { describeUrl } from '../../store/postgres/connect.ts';
import { checkScheme, probeTarget } from '../../store/postgres/preflight.ts';
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
    const s: PgStatus = await store.status().catch(async (e: unknown) => {
      // A fresh process: restarting cannot help, the folder itself is bound to the retired key.
      if (!(e instanceof RefusalError && e.refusal.data?.retired === true)) throw e;
      const to = (await probeTarget(b.url, b.key).catch(() => null))?.retired ?? 'elsewhere';
      throw new RefusalError(
        refuse(
          'state_incompatible',
          `This folder is bound to project key ${b.key} at ${describeUrl(b.url)}, which was retired: the project moved to ${to}. Work on it there, or bind this folder to another key with \`opencomms store init\`; nothing was written.`,
          { retired: true, code: 'key_retired' },
        ),
      );
    });
    const where = describeUrl(b.url);
    return ok(
      `Store: PostgreSQL ${s.server_version} at ${where}, project key ${b.key}\nHead: change ${s.head} (this process ${s.lag} behind; a cold start replays ${s.cold_start_changes})\nConnections of OpenComms to the database: ${s.connections}`,
      { store: 'postgres', server: where, key: b.key, ...s },
    );
  } finally {
    await store.close();
  }
}

/** What the files of a project on the file store hold; null when nothing (no channel, message or archive). */
async function filesHold(project: string, paths: StorePaths): Promise<string | null> {
  const file = new FileStore(project);
  try {
    const state = await file.read();
    const channels = Object.keys(state.channels).length;
    const messages = Object.keys(state.messages).length;
    const archives = (await listArchives(paths)).archives.length;
    if (!channels && !messages && !archives) return null;
    return `${channels} channel(s), ${messages} live message(s), ${archives} archive(s)`;
  } finally {
    await file.close();
  }
}

/** `store init`: everything checked first (preflight.ts; a retired key; state in this folder's
 *  files, which the binding would hide), then the binding written, under the file lock when the
 *  folder has files, so that no file writer adds state between the check and the binding. */
async function init(project: string, url: string, key: string): Promise<ToolResult<object>> {
  const found = await probeTarget(url, key);
  const server = describeUrl(url);
  if (found.retired !== null)
    return refuse(
      'state_incompatible',
      `Project key ${key} at ${server} was retired: the project moved to ${found.retired}. Work on it there, or pass another --key (a retired key stays taken); nothing was written.`,
      { retired: true, code: 'key_retired' },
    );
  // A binding that does not parse is replaced; the files are checked as for a folder on files.
  let bound: ReturnType<typeof readBinding>;
  try {
    bound = readBinding(project);
  } catch (e) {
    if (!(e instanceof RefusalError)) throw e;
    bound = { kind: 'file' };
  }
  const paths = resolvePaths(project);
  const bind = async () => {
    await writeBinding(project, url, key);
    return null;
  };
  const refused =
    bound.kind === 'file' && (existsSync(paths.state) || existsSync(paths.archives))
      ? await withLock(paths, async () => {
          const held = await filesHold(project, paths);
          if (!held) return bind();
          return refuse(
            'state_incompatible',
            `This project's state lives in its files (${held}), which a binding would hide: move it with \`opencomms store migrate --to '${url}' --key ${key}\` instead; nothing was written.`,
            { code: 'files_hold_project' },
          );
        })
      : await bind();
  if (refused) return refused;
  const joined = found.head > 0 ? `, which holds change ${found.head}` : '';
  return ok(
    `This project is now bound to ${server}, project key ${key}${joined} (.opencomms/store.json). ${REINSTALL}`,
    { store: 'postgres', server, key, head: found.head },
  );
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
  checkScheme(to, ', or `file` for the files of this folder');
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
    `-- Database-wide (PostgreSQL 15 and later have it already): no role creates objects in the public schema. Leave it out if other applications of this database need that.`,
    `revoke create on schema public from public;`,
    '',
  ].join('\n');
}

export const store: CliCommand = {
  register(program: Command, ctx: CliContext) {
    const group = program
      .command('store')
      .description('which store holds this project (files, or PostgreSQL for several computers)');
    group
      .command('init <url>')
      .description('bind this project to a PostgreSQL project key (no password is recorded)')
      .requiredOption('--key <project-key>', 'the project key, the same on every computer')
      .option('--json', 'one {ok, message, data} document')
      .action(async (url: string, o: { key: string; json?: boolean }, cmd: Command) => {
        const project = projectOf(cmd);
        const r = await asResult(() => init(project, url, o.key));
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
      .option('--json', 'one {ok, message, data} document (data.sql)')
      .action(async (o: { role: string; key?: string; json?: boolean }, cmd: Command) => {
        const r = await asResult(async () => {
          const b = readBinding(projectOf(cmd));
          const key = o.key ?? (b.kind === 'postgres' ? b.key : null);
          if (!key)
            return refuse('invalid_argument', 'This project is not bound to PostgreSQL: pass --key <project-key>.');
          const sql = grantSql(key, o.role);
          return ok(sql, { sql, key, role: o.role });
        });
        ctx.exit(answer(ctx.io, r, o.json, () => r.message));
      });
  },
};
