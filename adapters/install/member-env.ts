// The environment an installed MCP server entry carries (hosts.md "Installers"). The session's own
// OPENCOMMS_MEMBER_ID decides the member wherever it is set, so two sessions of one host in one
// project run as two members; the pinned member (from `opencomms install-member`) is the fallback,
// and a placeholder stands there until one is pinned (doctor reports it, install-member replaces it).
// Claude Code expands `${VAR:-default}` in `.mcp.json` env values. Codex expands nothing and a literal
// `env` value beats its `env_vars` passthrough, so Codex passes the session's variable through and
// names the pin in OPENCOMMS_PINNED_MEMBER_ID, which the server reads when the first is unset.
import { MCP_BUNDLE } from './bundle-names.ts';

export const MEMBER_ID_PLACEHOLDER = '<set by: opencomms install-member>';
/** What older installs wrote beside the member id: `"OPENCOMMS_MEMBER_ROLE": "<role label>"`. Nothing
 *  reads it (a member's role is the `role` argument of `opencomms_create` / `opencomms_join`, one per
 *  channel), so an install writes it no more and removes exactly this value from its own entry; any
 *  other value of that variable is the user's and stays. */
export const OLD_ROLE_VAR = 'OPENCOMMS_MEMBER_ROLE';
export const OLD_ROLE_VALUE = '<role label>';
export const MEMBER_ID_VAR = 'OPENCOMMS_MEMBER_ID';
export const PINNED_ID_VAR = 'OPENCOMMS_PINNED_MEMBER_ID';

/** Claude Code's value: the session's id, else the pin (`${OPENCOMMS_MEMBER_ID:-<pin>}`). */
export const claudeMemberValue = (pin: string) => `\${${MEMBER_ID_VAR}:-${pin}}`;
/** The pin inside a Claude Code value of that form, or the literal value itself. */
export function pinnedIn(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const m = new RegExp(`^\\$\\{${MEMBER_ID_VAR}:-(.*)\\}$`).exec(value);
  return m ? m[1] : value;
}
/** Does this value let the session's own OPENCOMMS_MEMBER_ID decide? */
export const followsSession = (value: unknown) => typeof value === 'string' && value.startsWith(`\${${MEMBER_ID_VAR}`);

export const claudeMemberEnv = (pin: string | null) => ({
  [MEMBER_ID_VAR]: claudeMemberValue(pin ?? MEMBER_ID_PLACEHOLDER),
});

export const codexMemberEnv = (pin: string | null) => ({
  [PINNED_ID_VAR]: pin ?? MEMBER_ID_PLACEHOLDER,
});

/** Where the PostgreSQL client finds a password (libpq's variables; ~/.pgpass needs only HOME,
 *  which every host passes). Codex gives its MCP servers only the variables `env_vars` lists, so a
 *  project bound to PostgreSQL lists these there: by name, never a value, and Codex passes only
 *  those the session sets. Claude Code 2.1.332 starts a project MCP server with the session's whole
 *  environment, so `.mcp.json` names none of them (test/real/mcp-env.test.ts). */
export const PG_PASSWORD_VARS = ['PGPASSWORD', 'PGPASSFILE'] as const;
/** What older installs wrote into `.mcp.json` for each of them: `${VAR:-}`, which Claude Code
 *  expands to an empty value when the session has none, hiding ~/.pgpass and PGPASSFILE from `pg`.
 *  An install removes exactly this value from its own entry. */
export const claudeInjectedPgValue = (v: string) => `\${${v}:-}`;

export const PG_NOTE =
  'This project is on PostgreSQL: its MCP server takes the password from PGPASSWORD or PGPASSFILE in the environment the session was started with, or from ~/.pgpass; no config file holds a password.';

/** Node flags of an installed MCP server (a departure from the argv in hosts.md "Installers", which
 *  starts at the bundle). V8 sizes the heap by allocation rate, not by the small live heap, so a
 *  256 MB old-space ceiling (room for a 2000-message archive) and a 2 MB young generation (a smaller
 *  one spends a pull's time in scavenges) bound a busy server's memory. `--v8-pool-size=1` keeps one
 *  V8 worker thread, not four; not `--single-threaded`, which moves the optimizing compiler onto
 *  the main thread, where each optimization stalls the call that triggered it. `--interrupt-budget
 *  =16384` (a quarter of V8's default) optimizes sooner: a tool call runs hundreds of functions once
 *  each, and with the default a server spends its first thousand calls in the interpreter. The
 *  figures are `npm run bench`'s (docs/performance.md). */
export const MCP_NODE_FLAGS = [
  '--max-semi-space-size=2',
  '--max-old-space-size=256',
  '--v8-pool-size=1',
  '--interrupt-budget=16384',
] as const;

/** The installed bundles and the project as the hosts' configs name them: relative to the project
 *  directory, where both hosts start a project's MCP server and hooks, so a moved, copied or cloned
 *  project runs its own files. */
export const PROJECT_ARG = '.';
export const relBundle = (name: string) => `.opencomms/${name}`;

/** argv of the installed MCP server bundle for one host label. */
/** A host's `opencomms` server entry is ours when it starts our bundle; a hand-written one is the user's. */
export const isOurServer = (entry: unknown) => entry !== undefined && JSON.stringify(entry).includes(MCP_BUNDLE);

export const serverArgs = (host: string) => [...MCP_NODE_FLAGS, relBundle(MCP_BUNDLE), PROJECT_ARG, '--host', host];
