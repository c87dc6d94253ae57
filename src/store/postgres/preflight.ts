// What `opencomms store init` and `store migrate --to <url>` check before they write anything
// (docs/postgres.md, "What init and migrate check"): the URL (scheme, no password, the rule for a
// server off loopback), the project key, that the server answers (reachable, TLS, credentials, the
// database), that the role may use the project's schema (the grant), and what the key holds now
// (nothing, a live project, a retired one, a newer layout). Nothing here writes: the probe only
// reads the catalog and the project's head, so a refused command leaves the server as it was.
import pg from './pg.ts';
import { RefusalError, refuse, type Refusal } from '../../protocol/result.ts';
import { clientConfig, describeUrl, isConnectionError, refusalOf, urlHasPassword } from './connect.ts';
import { PG_LAYOUT, ident, schemaOf } from './schema.ts';

/** What the project key holds on the server, as the probe found it. */
export interface TargetFound {
  /** The database role the URL connects as. */
  role: string;
  /** The schema's layout version; null when the key was never used (no schema or no tables). */
  layout: number | null;
  /** The number of the newest change (0: laid out, nothing committed). */
  head: number;
  /** Where a retired project moved; null when it is live or absent. */
  retired: string | null;
}

const no = (r: Refusal) => new RefusalError(r);

/** The URL's own checks, before any connection: a postgres:// URL that parses, with no password
 *  in it (it would be written into .opencomms/), and the rule for a server off loopback. */
export function checkUrl(url: string, key: string, env: NodeJS.ProcessEnv = process.env): pg.ClientConfig {
  checkScheme(url);
  if (urlHasPassword(url))
    throw no(
      refuse(
        'invalid_argument',
        `The URL for ${describeUrl(url)} contains a password, which would be written into .opencomms/: remove it and put the password in PGPASSWORD, ~/.pgpass or a 0600 file named by PGPASSFILE.`,
        { field: 'url', code: 'url_password' },
      ),
    );
  schemaOf(key);
  return clientConfig(url, env);
}

/** A URL that parses, of scheme postgres:// or postgresql://; `orElse` names what else the
 *  argument may be (`store migrate --to file`). */
export function checkScheme(url: string, orElse = ''): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw no(
      refuse(
        'invalid_argument',
        `The store URL is not a URL: use postgres://user@host:port/database (the password stays out of it)${orElse}.`,
        { field: 'url', code: 'url_unparsable' },
      ),
    );
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:')
    throw no(
      refuse(
        'invalid_argument',
        `The store URL starts with ${u.protocol}// where OpenComms needs a PostgreSQL URL: use postgres://user@host:port/database${orElse}.`,
        { field: 'url', code: 'url_scheme' },
      ),
    );
}

/** The catalog's answer on the project's schema, for the role connected. */
interface Grant {
  role: string;
  db_create: boolean;
  schema: boolean;
  usage: boolean;
  create: boolean;
  laid: boolean;
  tables: boolean;
}

const GRANT_SQL = `select current_user as role,
  has_database_privilege(current_database(), 'CREATE') as db_create,
  n.oid is not null as schema,
  coalesce(has_schema_privilege(n.oid, 'USAGE'), false) as usage,
  coalesce(has_schema_privilege(n.oid, 'CREATE'), false) as create,
  exists (select 1 from pg_class c where c.relnamespace = n.oid and c.relname in ('head', 'meta') and c.relkind = 'r') as laid,
  coalesce((select bool_and(case when c.relkind = 'S' then has_sequence_privilege(c.oid, 'USAGE')
      else has_table_privilege(c.oid, 'SELECT') and has_table_privilege(c.oid, 'INSERT')
        and has_table_privilege(c.oid, 'UPDATE') and has_table_privilege(c.oid, 'DELETE') end)
    from pg_class c where c.relnamespace = n.oid and c.relkind in ('r', 'S')), true) as tables
from (select 1) one left join pg_namespace n on n.nspname = $1`;

/** Connects as the URL says, reads what the key holds, and refuses whatever would make the store
 *  unusable: a server that cannot be reached, TLS that fails, credentials refused, no database, no
 *  grant, a layout of a newer OpenComms. The caller decides about a live or retired project. */
export async function probeTarget(
  url: string,
  key: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<TargetFound> {
  const config = checkUrl(url, key, env);
  const server = describeUrl(url);
  const schema = schemaOf(key);
  const c = new pg.Client(config);
  c.on('error', () => {});
  try {
    try {
      await c.connect();
    } catch (e) {
      throw no(connectRefusal(e, server));
    }
    const g = (await c.query<Grant>({ text: GRANT_SQL, values: [schema] })).rows[0]!;
    const allowed = g.schema ? g.usage && g.create && g.tables : g.db_create;
    if (!allowed)
      throw no(
        refuse(
          'state_unreadable',
          `The database role ${g.role} at ${server} may not use project key ${key} (schema ${schema}${g.schema ? '' : ', which it may not create'}): have an administrator run the SQL of \`opencomms store grant --role ${g.role} --key ${key}\`, then retry; nothing was written.`,
          { code: 'no_grant', role: g.role },
        ),
      );
    if (!g.laid) return { role: g.role, layout: null, head: 0, retired: null };
    const s = ident(schema);
    const h = await c.query<{ layout: number | null; seq: string | null; retired: string | null }>(
      `select (select layout from ${s}.meta limit 1) as layout, (select seq from ${s}.head) as seq, (select retired from ${s}.head) as retired`,
    );
    const row = h.rows[0]!;
    const layout = row.layout ?? null;
    if (layout !== null && layout > PG_LAYOUT)
      throw no(
        refuse(
          'state_incompatible',
          `Project key ${key} at ${server} was laid out by a newer OpenComms (layout ${layout}, this one knows ${PG_LAYOUT}): upgrade OpenComms on this computer, then retry; nothing was written.`,
          { code: 'newer_layout' },
        ),
      );
    return { role: g.role, layout, head: Number(row.seq ?? 0), retired: row.retired };
  } catch (e) {
    if (e instanceof RefusalError) throw e;
    const r = refusalOf(e, server);
    throw r ? no(r) : e;
  } finally {
    await c.end().catch(() => {});
  }
}

/** A connection that did not open, as the refusal that says what to fix. */
function connectRefusal(e: unknown, server: string): Refusal {
  const r = refusalOf(e, server);
  const code = (e as { code?: string })?.code;
  if (r && isConnectionError(e) && r.data?.code === undefined)
    return refuse(
      'state_unreadable',
      `PostgreSQL at ${server} cannot be reached (${code ?? 'connection failed'}): check the host and port in the URL and that the server runs, then retry; nothing was written.`,
      { code: code ?? 'unreachable' },
    );
  if (r) return r;
  return refuse(
    'state_unreadable',
    `PostgreSQL at ${server} could not be connected to (${code ?? 'no error code'}): check the URL and the server, then retry; nothing was written.`,
    { code: code ?? 'connect_failed' },
  );
}
