// The hook runner's glance at a project bound to PostgreSQL: its mailbox rows (mailbox.ts), read
// in one query on one short connection (wire.ts), as the part of the state triage reads. Only a
// plain connection to a loopback server, with no password or PGPASSWORD's, is tried here;
// anything else (TLS, ~/.pgpass, a server that refuses, a retired or newer-layout project) is
// `unknown`, and the full path decides with the store itself: a glance must never miss mail.
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import type { Glance } from '../types.ts';
import { rawState, type MailboxRow } from './mailbox.ts';
import { PG_LAYOUT, PROJECT_KEY_RE, ident, mailboxRowJson } from './schema.ts';
import { simpleQuery, type WireTarget } from './wire.ts';

const GLANCE_TIMEOUT_MS = 3_000;
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\]|::1)$/i;
const PLAIN_SSLMODES = new Set(['disable', 'allow', 'prefer']);

/** Where a binding's URL points, when the glance may go there on its own; null otherwise. */
export function wireTarget(url: string, env: NodeJS.ProcessEnv): WireTarget | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') return null;
  for (const [k, v] of u.searchParams) if (k !== 'sslmode' || !PLAIN_SSLMODES.has(v)) return null;
  const host = u.hostname || env.PGHOST || 'localhost';
  const socketDir = host.startsWith('/') ? host : undefined;
  if (!socketDir && !LOOPBACK.test(host)) return null;
  const user = decodeURIComponent(u.username) || env.PGUSER || userInfo().username;
  return {
    host: socketDir ? undefined : host.replace(/^\[(.*)\]$/, '$1'),
    socketDir,
    port: Number(u.port || env.PGPORT || 5432),
    user,
    database: decodeURIComponent(u.pathname.slice(1)) || env.PGDATABASE || user,
    // An empty PGPASSWORD is none, as libpq reads it (password.ts).
    password: env.PGPASSWORD || undefined,
  };
}

export async function pgGlance(bindingFile: string, env: NodeJS.ProcessEnv): Promise<Glance> {
  try {
    const b = JSON.parse(readFileSync(bindingFile, 'utf8')) as { kind?: unknown; url?: unknown; key?: unknown };
    if (b.kind !== 'postgres' || typeof b.url !== 'string' || typeof b.key !== 'string' || !PROJECT_KEY_RE.test(b.key))
      return { kind: 'unknown' };
    const target = wireTarget(b.url, env);
    if (!target) return { kind: 'unknown' };
    const s = ident(`oc_${b.key}`);
    const rows = await simpleQuery(
      target,
      `select (select layout from ${s}.meta limit 1), h.retired, case when m.session_id is not null then ${mailboxRowJson('m')}::text end from ${s}.head h left join ${s}.mailbox m on true`,
      GLANCE_TIMEOUT_MS,
    );
    if (!rows.length || rows.some((r) => Number(r[0]) !== PG_LAYOUT || r[1] !== null)) return { kind: 'unknown' };
    const members = rows.flatMap((r) => (r[2] === null ? [] : [JSON.parse(r[2]) as MailboxRow]));
    return { kind: 'state', state: rawState(members) };
  } catch {
    return { kind: 'unknown' };
  }
}
