// Where the PostgreSQL store's password comes from, read here as libpq reads it (docs/postgres.md):
// the URL, else PGPASSWORD, else the password file: the one PGPASSFILE names, else ~/.pgpass
// (%APPDATA%\postgresql\pgpass.conf on Windows). An empty variable counts as unset, as in libpq: a
// host that passes a variable its config names may pass it empty (Codex's `env_vars` does when the
// session set it so).
//
// OpenComms reads the file itself instead of leaving it to `pg`: pg 8 prints "DeprecationWarning:
// pgpass support is deprecated" on stderr whenever it takes a password from the file, and the
// stderr of a Claude Code wake waiter is the text the model is woken with. Handing `pg` a password
// function (its supported way) keeps pg's own reading of the file from ever running. Like libpq,
// a file that group or others may read is ignored; nothing is printed about it either (the
// credentials refusal names the sources to check).
import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** A PostgreSQL variable of `env`, undefined when unset or empty (libpq's reading). */
export const pgEnv = (env: NodeJS.ProcessEnv, name: string): string | undefined => {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
};

/** The password file libpq would read with this environment. */
export function passFilePath(env: NodeJS.ProcessEnv, platform = process.platform): string {
  const named = pgEnv(env, 'PGPASSFILE');
  if (named) return named;
  if (platform === 'win32') return join(pgEnv(env, 'APPDATA') ?? homedir(), 'postgresql', 'pgpass.conf');
  return join(pgEnv(env, 'HOME') ?? homedir(), '.pgpass');
}

/** What a line of the file is matched against. */
export interface PassTarget {
  host?: string;
  port?: number | string;
  database?: string;
  user?: string;
}

/** libpq's default Unix socket directories: a connection through one matches `localhost`. */
const DEFAULT_SOCKET_DIRS = new Set(['/tmp', '/var/run/postgresql', '/run/postgresql']);

/** The line's fields split at unescaped colons, each with its escapes (`\:`, `\\`) undone; the
 *  fifth holds the rest of the line (a password may contain colons when escaped). */
function fields(line: string): string[] | null {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\' && i + 1 < line.length) {
      cur += line[++i];
    } else if (c === ':' && out.length < 4) {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out.length === 5 ? out : null;
}

const matches = (pattern: string, value: string) => pattern === '*' || pattern === value;

/** The password the file holds for `at`: the first line that matches, as libpq takes it; undefined
 *  when the file is missing, unreadable, not a plain file, open to group or others, or has no match. */
export function passwordFromFile(file: string, at: PassTarget, platform = process.platform): string | undefined {
  let text: string;
  try {
    const st = statSync(file);
    if (!st.isFile()) return undefined;
    if (platform !== 'win32' && (st.mode & 0o077) !== 0) return undefined;
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const host = !at.host || DEFAULT_SOCKET_DIRS.has(at.host) ? 'localhost' : at.host;
  const port = String(at.port || 5432);
  for (const raw of text.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (!line || line.startsWith('#')) continue;
    const f = fields(line);
    if (!f) continue;
    const [h, p, d, u, password] = f as [string, string, string, string, string];
    if (matches(h, host) && matches(p, port) && matches(d, at.database ?? '') && matches(u, at.user ?? ''))
      return password || undefined;
  }
  return undefined;
}

/** The password for a connection whose URL carries none: PGPASSWORD, else the password file. */
export const passwordFor = (env: NodeJS.ProcessEnv, at: PassTarget): string | undefined =>
  pgEnv(env, 'PGPASSWORD') ?? passwordFromFile(passFilePath(env), at);
