// How the PostgreSQL store reaches its server, with authentication by construction (protocol.md
// "Security": any networked transport requires it): a server off loopback is used only over TLS whose
// certificate is verified (sslmode verify-full or verify-ca) and with credentials, and a URL
// that breaks the rule is refused before any connection is made. Passwords never come from
// `.opencomms/`: the environment (PGPASSWORD, or a password in OPENCOMMS_DATABASE_URL), ~/.pgpass
// or a user-only file named by PGPASSFILE, as libpq reads them, an empty variable counting as unset
// (password.ts reads the file; `pg` is handed a password function, so its own reading never runs).
import { existsSync } from 'node:fs';
import type pg from 'pg';
import { parseIntoClientConfig } from 'pg-connection-string';
import { RefusalError, refuse, type Refusal } from '../../protocol/result.ts';
import { PG_CONNECT_TIMEOUT_MS, PG_IDLE_IN_TRANSACTION_MS, PG_LOCK_TIMEOUT_MS } from './limits.ts';
import { passFilePath, passwordFor, pgEnv } from './password.ts';

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|::1|\[::1\])$/i;
const VERIFIED = new Set(['verify-full', 'verify-ca']);

/** Where a URL points, without any secret: for `location`, logs and status. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    const user = u.username ? `${decodeURIComponent(u.username)}@` : '';
    return `postgres://${user}${u.host || 'localhost'}${u.pathname}`;
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** Whether the URL itself carries a password (a binding must never record one). */
export const urlHasPassword = (url: string): boolean => {
  try {
    return new URL(url).password !== '';
  } catch {
    return false;
  }
};

const isLoopback = (host: string | undefined) => !host || host.startsWith('/') || LOOPBACK.test(host);

const hasCredentials = (cfg: pg.ClientConfig, env: NodeJS.ProcessEnv) =>
  Boolean(cfg.password) ||
  pgEnv(env, 'PGPASSWORD') !== undefined ||
  existsSync(passFilePath(env)) ||
  (typeof cfg.ssl === 'object' && cfg.ssl !== null && Boolean(cfg.ssl.cert) && Boolean(cfg.ssl.key));

/** pg 8 reads sslmode prefer, require and verify-ca as verify-full, and says so in a warning of
 *  ten lines on stderr (a Claude Code wake waiter's stderr is the text the model is woken with):
 *  the URL it parses names verify-full itself, which is what pg does with those modes. */
const ALIASED_SSLMODES = new Set(['prefer', 'require', 'verify-ca']);
function asParsed(url: string): string {
  try {
    const u = new URL(url);
    const mode = u.searchParams.get('sslmode');
    if (!mode || !ALIASED_SSLMODES.has(mode) || u.searchParams.get('uselibpqcompat') === 'true') return url;
    u.searchParams.set('sslmode', 'verify-full');
    return u.toString();
  } catch {
    return url;
  }
}

/** Server options of every connection, after any the URL's `options` names. A store's queries
 *  read and write a handful of rows, but the planner estimates a read of the changes after a
 *  sequence number (`seq > $1`) from the table's size on disk, which compaction's deletes grow
 *  until autovacuum analyzes the table. Past a few MB it planned that read as a parallel scan, and
 *  starting the workers took ~10 ms to answer a few rows (`npm run bench -- postgres mcp`: every
 *  catch-up of the reader, and its pull of 100 at 4-6x its floor instead of 2-3x). JIT off for the
 *  same reason: a cost estimated that high would compile the query too. */
const SESSION_OPTIONS = '-c max_parallel_workers_per_gather=0 -c jit=off';

/** The client configuration of a URL, or the refusal that forbids connecting at all. */
export function clientConfig(url: string, env: NodeJS.ProcessEnv = process.env): pg.ClientConfig {
  let cfg: pg.ClientConfig;
  try {
    cfg = parseIntoClientConfig(asParsed(url));
  } catch (e) {
    // pg-connection-string reads sslrootcert, sslcert and sslkey as it parses.
    const file = e as NodeJS.ErrnoException;
    if (file?.code && file.path)
      throw new RefusalError(
        refuse(
          'invalid_argument',
          `The store URL for ${describeUrl(url)} names a TLS file that cannot be read (${file.code}): ${file.path}. Fix sslrootcert, sslcert or sslkey in the URL; nothing was written.`,
          { field: 'url', code: 'tls_file' },
        ),
      );
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `The database URL ${describeUrl(url)} cannot be parsed: use postgres://user@host:port/database.`,
      ),
    );
  }
  const host = cfg.host || pgEnv(env, 'PGHOST');
  if (!isLoopback(host)) {
    const sslmode = new URL(url).searchParams.get('sslmode') ?? pgEnv(env, 'PGSSLMODE') ?? '';
    if (!VERIFIED.has(sslmode))
      throw new RefusalError(
        refuse(
          'invalid_argument',
          `Refusing to connect to ${describeUrl(url)}: a server off loopback needs TLS with a verified certificate. Add ?sslmode=verify-full (and sslrootcert=<CA file> if the CA is private).`,
        ),
      );
    if (!cfg.user || !hasCredentials(cfg, env))
      throw new RefusalError(
        refuse(
          'invalid_argument',
          `Refusing to connect to ${describeUrl(url)}: a server off loopback needs a user and credentials. Name the user in the URL and put the password in PGPASSWORD, ~/.pgpass or a 0600 file named by PGPASSFILE.`,
        ),
      );
  }
  // A password the URL carries stands; else pg asks this function when the server wants one.
  const password =
    typeof cfg.password === 'string' && cfg.password !== ''
      ? cfg.password
      : async (p: { host?: string; port?: number; database?: string; user?: string }) => passwordFor(env, p);
  return {
    ...cfg,
    password,
    connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
    lock_timeout: PG_LOCK_TIMEOUT_MS,
    idle_in_transaction_session_timeout: PG_IDLE_IN_TRANSACTION_MS,
    application_name: 'opencomms',
    options: [cfg.options, SESSION_OPTIONS].filter(Boolean).join(' '),
    keepAlive: true,
  } as pg.ClientConfig;
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '08006',
  '08001',
  '08003',
]);

/** Node's TLS errors: a certificate not trusted, expired, or for another host; a handshake that failed. */
const TLS_CODES =
  /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|HOSTNAME_MISMATCH$|EPROTO$)/;

/** Whether an error means the connection is gone (the next call connects again). */
export function isConnectionError(e: unknown): boolean {
  const err = e as { code?: string; message?: string };
  if (err?.code && CONNECTION_CODES.has(err.code)) return true;
  return /Connection terminated|timeout expired|Client has encountered a connection error|not queryable|ended/i.test(
    err?.message ?? '',
  );
}

/** A server's error as the refusal a user can act on; null for one that is a fault. The message
 *  names the server without its password, and never repeats the server's own text (which can
 *  quote the connection string). */
export function refusalOf(e: unknown, where: string): Refusal | null {
  if (e instanceof RefusalError) return e.refusal;
  const code = (e as { code?: string })?.code;
  if (code === '55P03')
    return refuse(
      'state_busy',
      `Another process has held this project's lock in PostgreSQL (${where}) for over ${PG_LOCK_TIMEOUT_MS / 1000} s; retry shortly.`,
    );
  if (code === '28P01' || code === '28000')
    return refuse(
      'state_unreadable',
      `PostgreSQL at ${where} refused the credentials: check the user in the store URL and the password in PGPASSWORD, ~/.pgpass or PGPASSFILE.`,
      { code: 'credentials' },
    );
  if (code === '3D000')
    return refuse(
      'state_unreadable',
      `The database of ${where} does not exist: create it (docs/postgres.md) or fix the URL with \`opencomms store init\`.`,
      { code: 'no_database' },
    );
  if (code === '42501')
    return refuse(
      'state_unreadable',
      `The database role of ${where} may not use this project's schema: run the SQL of \`opencomms store grant\` as an administrator.`,
      { code: 'no_grant' },
    );
  if (code === '22P05')
    return refuse(
      'invalid_argument',
      `PostgreSQL (${where}) cannot store the character U+0000 that this change holds (in a message, a summary or a name): leave it out; nothing was written.`,
      { code: 'nul_character' },
    );
  if (code === 'OC001') return retired(where);
  if (code === '53100')
    return refuse(
      'store_unwritable',
      `PostgreSQL at ${where} has no room left on its disk (disk_full), so this change was not made. Free space on the server's disk (or ask its administrator to), then retry.`,
      { code: 'disk_full' },
    );
  if ((e as Error)?.message === 'The server does not support SSL connections')
    return refuse(
      'state_unreadable',
      `PostgreSQL at ${where} does not accept TLS, which the store URL's sslmode asks for: turn ssl on in the server's configuration, or on loopback drop sslmode from the URL; nothing was written.`,
      { code: 'tls_unsupported' },
    );
  if (code && TLS_CODES.test(code))
    return refuse(
      'state_unreadable',
      `PostgreSQL at ${where} presented a TLS certificate that was not accepted (${code}): name the CA that signed it with sslrootcert=<file> in the URL, and with verify-full connect by a host name the certificate holds; nothing was written.`,
      { code: 'tls_certificate' },
    );
  if (isConnectionError(e)) {
    const cause = (e as { code?: string }).code ?? 'connection lost';
    return refuse(
      'state_unreadable',
      `PostgreSQL at ${where} cannot be reached (${cause}); nothing was written. Check that the server runs (\`opencomms store status\`), then retry.`,
    );
  }
  return null;
}

/** The refusal of every call on a project that moved to another store (`store migrate`): the
 *  retired copy is never read or written again, so two copies can never both go on. */
export const retired = (where: string, to?: string): Refusal =>
  refuse(
    'state_incompatible',
    `This project's store at ${where} was retired: the project moved${to ? ` to ${to}` : ' elsewhere'}; nothing was written. Restart this process if it started before the move (it then opens the store its folder is bound to now); if this folder is still bound here (\`opencomms store status\`), work where the project went, or bind another key with \`opencomms store init\`.`,
    { retired: true },
  );

/** The error to throw for a server error: its refusal, or the error itself (a fault). */
export const asRefusal = (e: unknown, where: string): unknown => {
  const r = refusalOf(e, where);
  return r ? new RefusalError(r) : e;
};
