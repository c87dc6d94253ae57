// The host commands of the CLI (hosts.md "Installers"; operator.md "Command line"): install / uninstall <host>,
// install-member, bind. Each returns a ToolResult and its exit code; the dispatcher only prints.
import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type ParseError, parse as parseJsonc, printParseErrorCode } from 'jsonc-parser';
import {
  HOST as CLAUDE,
  claudePaths,
  claudeUses,
  pinnedOf as claudePinnedOf,
  planClaudeInstall,
  planClaudeUninstall,
} from '../../adapters/claude-code/install.ts';
import {
  HOST as CODEX,
  codexPaths,
  codexUses,
  pinnedOf as codexPinnedOf,
  planCodexInstall,
  planCodexUninstall,
} from '../../adapters/codex/install.ts';
import { parseToml, placeholderRange, serverOf, tomlString } from '../../adapters/codex/config-toml.ts';
import { allBundles } from '../../adapters/install/bundles.ts';
import { applyChanges, readTargets } from '../../adapters/install/files.ts';
import { parseRecord, recordChange, recordPath } from '../../adapters/install/record.ts';
import { isObject, parseObject, replace } from '../../adapters/install/json.ts';
import {
  claudeMemberValue,
  MEMBER_ID_PLACEHOLDER,
  MEMBER_ID_VAR,
  pinnedIn,
  PINNED_ID_VAR,
  isOurServer,
} from '../../adapters/install/member-env.ts';
import { isRefusal, malformed, type InstallPlan } from '../../adapters/install/plan.ts';
import { HOST_LABEL_RE, isMemberId, MEMBER_ID_RE, newMemberId } from '../protocol/ids.ts';
import { ok, refuse, type Reason, type Refusal, type ToolResult } from '../protocol/result.ts';
import { ensureDir, listPins, readPin, resolvePaths, writePin } from '../store/index.ts';
import { openRuntime } from '../runtime/runtime.ts';
import { readBinding } from '../store/binding.ts';
import { PACKAGE_ROOT } from '../version.ts';

export interface CommandResult {
  result: ToolResult;
  code: number;
}

const outcome = (result: ToolResult): CommandResult => ({ result, code: result.ok ? 0 : 1 });

export const INSTALLABLE = ['opencode', CLAUDE, CODEX, 'claude-desktop'] as const;

/** `claude --version` / `codex --version` within this long; an absent or slow CLI only warns. */
const DETECT_TIMEOUT_MS = 15_000;

export type Detect = (bin: string) => Promise<string | null>;

/** The CLI's version line, or null when it cannot be run (informational, hosts.md "Installers"). */
export const detectCli: Detect = (bin) =>
  new Promise((res) => {
    const win = process.platform === 'win32';
    const [file, args] = win ? ['cmd.exe', ['/d', '/s', '/c', `${bin} --version`]] : [bin, ['--version']];
    execFile(file, args, { timeout: DETECT_TIMEOUT_MS, windowsHide: true }, (err, stdout) =>
      res(err ? null : (stdout.trim().split('\n')[0] ?? '')),
    );
  });

export interface HostOptions {
  warn?: (line: string) => void;
  detect?: Detect;
}

/** The one pinned member of `host` in this project, if exactly one exists. */
async function onlyPin(project: string, host: string): Promise<string | null> {
  const pins = (await listPins(resolvePaths(project))).pins.filter((p) => p.host === host);
  return pins.length === 1 ? pins[0]!.member_id : null;
}

/** Why the hosts could not run what an install writes here, or null. A backslash is a path
 *  separator only on Windows: elsewhere Node turns it into an invalid module specifier. */
function unrunnablePath(project: string, platform = process.platform): Refusal | null {
  if (platform !== 'win32' && project.includes('\\'))
    return refuse(
      'invalid_argument',
      `The project path ${JSON.stringify(project)} holds a backslash, which Node cannot load a module from on ${platform}; nothing was written. Move the project to a path without one.`,
    );
  return null;
}

/** `.opencomms` must be a directory (state, pins and the bundles live there); a file of that name
 *  is refused before anything is written. */
function unusableStateDir(project: string): Refusal | null {
  const dir = resolvePaths(project).dir;
  const st = statSync(dir, { throwIfNoEntry: false });
  if (!st || st.isDirectory()) return null;
  return refuse(
    'state_unreadable',
    `${dir} is not a directory; OpenComms keeps its state, pins and bundles there. Move that file away, then run the command again. Nothing was written.`,
  );
}

async function runPlan(
  project: string,
  host: string,
  plan: InstallPlan | Refusal,
  before: Map<string, string | null>,
  done: (changed: string[]) => string,
): Promise<CommandResult> {
  if (isRefusal(plan)) return outcome(plan);
  const changes = [...plan.changes];
  const rec = plan.record && recordChange(project, before.get(recordPath(project)) ?? null, host, plan.record);
  if (rec) changes.push(rec);
  // `.opencomms/` is created the store's way (with its .gitignore) before a bundle lands in it.
  if (changes.some((c) => c.content !== null)) await ensureDir(resolvePaths(project));
  const changed = await applyChanges(changes, before);
  const repaired = plan.repaired?.length ? [`Repaired: ${plan.repaired.join('; ')}.`] : [];
  const shown = changed.filter((c) => c !== recordPath(project));
  return outcome(
    ok([done(shown), ...repaired, ...plan.notes].join('\n'), { changed: shown, repaired: plan.repaired ?? [] }),
  );
}

/** Whether the project is bound to PostgreSQL (a binding that cannot be read counts as not: the
 *  entry points report it themselves). */
function onPostgres(project: string): boolean {
  try {
    return readBinding(project).kind === 'postgres';
  } catch {
    return false;
  }
}

const relative = (project: string, paths: string[]) =>
  paths.map((p) => p.slice(project.length + 1)).join(', ') || 'nothing (already up to date)';

export async function install(host: string | undefined, project: string, o: HostOptions = {}): Promise<CommandResult> {
  const warn = o.warn ?? (() => {});
  const detect = o.detect ?? detectCli;
  const unusable =
    host === 'opencode' || host === CLAUDE || host === CODEX
      ? (unrunnablePath(project) ?? unusableStateDir(project))
      : null;
  if (unusable) return outcome(unusable);
  const malformedConfig = host === undefined ? null : await configSyntax(project, [host]);
  if (malformedConfig) return outcome(malformedConfig);
  switch (host) {
    case 'opencode': {
      const { installOpenCode } = await import('../../adapters/opencode/install.ts');
      return outcome(await installOpenCode(project, warn));
    }
    case CLAUDE:
    case CODEX: {
      const bin = host === CLAUDE ? 'claude' : 'codex';
      if ((await detect(bin)) === null)
        warn(`\`${bin} --version\` did not run: ${host} is installed for this project anyway.`);
      const p = host === CLAUDE ? claudePaths(project) : codexPaths(project);
      const before = await readTargets([...Object.values(p), recordPath(project)]);
      const bundles = await allBundles();
      const pin = await onlyPin(project, host);
      const pg = onPostgres(project);
      const plan =
        host === CLAUDE
          ? planClaudeInstall(project, before, bundles, pin, pg)
          : planCodexInstall(project, before, bundles, pin, pg);
      return runPlan(project, host, plan, before, (c) => `Installed OpenComms for ${host}: ${relative(project, c)}.`);
    }
    case 'claude-desktop': {
      const args = [join(PACKAGE_ROOT, 'bin', 'opencomms.js'), 'mcp', '--project', project, '--host', 'claude-desktop'];
      const config = {
        mcpServers: {
          opencomms: {
            command: process.execPath,
            args,
            env: { OPENCOMMS_MEMBER_ID: MEMBER_ID_PLACEHOLDER },
          },
        },
      };
      return outcome(
        ok(
          `Claude Desktop is configured by hand; nothing was written. Add this to its claude_desktop_config.json (then set the member id with \`opencomms install-member --host claude-desktop\`):\n${JSON.stringify(config, null, 2)}`,
          config,
        ),
      );
    }
    case 'chatgpt':
      return outcome(
        refuse(
          'host_not_installable',
          'ChatGPT needs a networked MCP transport, which OpenComms does not ship (it never listens beyond loopback). Use claude-code, codex or opencode.',
        ),
      );
    default:
      return outcome(
        refuse('invalid_argument', `install supports: ${INSTALLABLE.join(', ')}${host ? ` (not "${host}")` : ''}.`),
      );
  }
}

/** The hosts `install` with no host sets up, with the project files and the CLI that reveal each. */
const FOUND_BY: ReadonlyArray<{ host: 'opencode' | typeof CLAUDE | typeof CODEX; bin: string; files: string[] }> = [
  { host: 'opencode', bin: 'opencode', files: ['opencode.json', 'opencode.jsonc', '.opencode'] },
  { host: CLAUDE, bin: 'claude', files: ['.claude', '.mcp.json', 'CLAUDE.md'] },
  { host: CODEX, bin: 'codex', files: ['.codex', 'AGENTS.md'] },
];

/** The config files each host's install reads and rewrites, with their syntax. */
const CONFIGS_OF = (project: string, host: string): Array<{ path: string; syntax: 'json' | 'toml' }> =>
  host === 'opencode'
    ? [
        {
          path: existsSync(join(project, 'opencode.jsonc'))
            ? join(project, 'opencode.jsonc')
            : join(project, 'opencode.json'),
          syntax: 'json',
        },
      ]
    : host === CLAUDE
      ? [
          { path: claudePaths(project).mcp, syntax: 'json' },
          { path: claudePaths(project).settings, syntax: 'json' },
        ]
      : host === CODEX
        ? [
            { path: codexPaths(project).config, syntax: 'toml' },
            { path: codexPaths(project).hooks, syntax: 'json' },
          ]
        : [];

export interface SyntaxProblem {
  /** Relative to the project. */
  file: string;
  line: number;
  column: number;
  problem: string;
}

/** 1-based line and column of `offset` in `text`. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const nl = before.lastIndexOf('\n');
  return { line: before.split('\n').length, column: offset - nl };
}

/** Where a config file stops parsing, or null when it parses (or is not there). */
async function syntaxProblem(project: string, path: string, syntax: 'json' | 'toml'): Promise<SyntaxProblem | null> {
  const text = (await readTargets([path])).get(path) ?? null;
  if (text === null) return null;
  const file = path.slice(project.length + 1);
  if (syntax === 'toml') {
    const { parseTOML } = await import('toml-eslint-parser');
    try {
      parseTOML(text);
      return null;
    } catch (e) {
      const err = e as { message: string; lineNumber?: number; column?: number };
      return { file, line: err.lineNumber ?? 1, column: (err.column ?? 0) + 1, problem: err.message };
    }
  }
  const errors: ParseError[] = [];
  const value: unknown = parseJsonc(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length) {
    const first = errors[0]!;
    // "PropertyNameExpected" → "property name expected"
    const problem = printParseErrorCode(first.error)
      .replace(/([a-z])([A-Z])/g, '$1 $2')
      .toLowerCase();
    return { file, ...lineColumn(text, first.offset), problem };
  }
  return isObject(value) ? null : { file, line: 1, column: 1, problem: 'not a JSON object' };
}

/** Every config the installs of `hosts` would read, checked before any of them writes: a file that
 *  does not parse is named with its line and column, and nothing is written for any host. */
export async function configSyntax(project: string, hosts: readonly string[]): Promise<Refusal | null> {
  const problems: SyntaxProblem[] = [];
  for (const host of hosts)
    for (const c of CONFIGS_OF(project, host)) {
      const p = await syntaxProblem(project, c.path, c.syntax);
      if (p) problems.push(p);
    }
  if (!problems.length) return null;
  return refuse(
    'config_malformed',
    `${problems.map((p) => `${p.file}: line ${p.line}, column ${p.column}: ${p.problem}`).join('; ')}; nothing was written. Fix ${problems.length === 1 ? 'it' : 'them'} and run the command again.`,
    { files: problems },
  );
}

/** Each host whose files are in the project or whose CLI runs here, and what showed it. */
async function foundHosts(project: string, detect: Detect) {
  const found = await Promise.all(
    FOUND_BY.map(async (h) => {
      const file = h.files.find((f) => existsSync(join(project, f)));
      if (file) return { host: h.host, why: `${file} in the project` };
      return (await detect(h.bin)) !== null ? { host: h.host, why: `\`${h.bin}\` on the PATH` } : null;
    }),
  );
  return found.filter((f) => f !== null);
}

/** `opencomms install` with no host: every host found, a member pinned for each MCP host that has
 *  none, and one report of what was done and what to do next. Running it again changes nothing. */
export async function installAll(project: string, o: HostOptions = {}): Promise<CommandResult> {
  const detect = o.detect ?? detectCli;
  const found = await foundHosts(project, detect);
  if (!found.length)
    return outcome(
      refuse(
        'invalid_argument',
        `No host found in this project or on the PATH (OpenCode, Claude Code, Codex); nothing was written. Name one: opencomms install <${INSTALLABLE.slice(0, 3).join('|')}>.`,
      ),
    );
  const malformedConfig = await configSyntax(
    project,
    found.map((f) => f.host),
  );
  if (malformedConfig) return outcome(malformedConfig);
  const lines: string[] = [];
  const changed: string[] = [];
  const installed: string[] = [];
  for (const { host, why } of found) {
    lines.push(`${host} (${why}):`);
    // One line: what stopped, and which hosts were installed before it (their files stay written).
    const failed = (r: CommandResult) =>
      outcome(
        refuse(
          String(r.result.data?.reason ?? 'internal_error') as Reason,
          `${host} (${why}): ${r.result.message}${installed.length ? ` Installed before it: ${installed.join(', ')}.` : ''}`,
          { ...r.result.data, host, installed },
        ),
      );
    // The member is pinned before the install, which then names it. A committed config may already
    // name one (another clone pinned it): pinning that id keeps the hooks and the server on one member.
    if (host !== 'opencode' && !(await listPins(resolvePaths(project))).pins.some((p) => p.host === host)) {
      const m = await installMember(project, { host, id: (await configuredMember(project, host)) ?? undefined });
      if (!m.result.ok) return failed(m);
      lines.push(`  Pinned member ${(m.result.data as { member_id: string }).member_id} for ${host}.`);
    }
    const r = await install(host, project, { ...o, detect: async () => 'found' });
    if (!r.result.ok) return failed(r);
    lines.push(...r.result.message.split('\n').map((l) => `  ${l}`));
    changed.push(...((r.result.data as { changed?: string[] } | undefined)?.changed ?? []));
    installed.push(host);
  }
  return outcome(ok(lines.join('\n'), { hosts: found.map((f) => f.host), changed }));
}

/** The member id the host's installed MCP entry names as its pin, if any. */
async function configuredMember(project: string, host: typeof CLAUDE | typeof CODEX): Promise<string | null> {
  if (host === CLAUDE) {
    const mcp = parseObject((await readTargets([claudePaths(project).mcp])).get(claudePaths(project).mcp) ?? '');
    return isObject(mcp?.mcpServers) && isOurServer(mcp.mcpServers.opencomms)
      ? claudePinnedOf(mcp.mcpServers.opencomms)
      : null;
  }
  const toml = parseToml((await readTargets([codexPaths(project).config])).get(codexPaths(project).config) ?? '');
  const entry = toml ? serverOf(toml.value) : undefined;
  return isOurServer(entry) ? codexPinnedOf(entry) : null;
}

/** `opencomms uninstall` with no host: each host's uninstall, stopping at the first refusal. */
export async function uninstallAll(project: string): Promise<CommandResult> {
  const lines: string[] = [];
  for (const host of [CODEX, CLAUDE, 'opencode']) {
    const r = await uninstall(host, project);
    lines.push(`${host}: ${r.result.message}`);
    if (!r.result.ok)
      return outcome(refuse(String(r.result.data?.reason ?? 'internal_error') as Reason, lines.join('\n')));
  }
  return outcome(ok(lines.join('\n')));
}

export async function uninstall(host: string | undefined, project: string): Promise<CommandResult> {
  if (host === 'opencode') {
    const { uninstallOpenCode } = await import('../../adapters/opencode/install.ts');
    return outcome(await uninstallOpenCode(project));
  }
  if (host !== CLAUDE && host !== CODEX)
    return outcome(
      refuse('invalid_argument', `uninstall supports: opencode, ${CLAUDE}, ${CODEX}${host ? ` (not "${host}")` : ''}.`),
    );
  const before = await readTargets([
    ...new Set([...Object.values(claudePaths(project)), ...Object.values(codexPaths(project)), recordPath(project)]),
  ]);
  // The two hosts share the server bundle and the hook runner: each stays while the other uses it,
  // and when the other's config cannot be read nobody can tell, so nothing is removed.
  const otherHost = host === CLAUDE ? CODEX : CLAUDE;
  const other = host === CLAUDE ? codexUses(before, project) : claudeUses(before, project);
  if (!other)
    return outcome(
      refuse(
        'config_malformed',
        `${otherHost}'s config in this project is malformed, so it cannot be told whether ${otherHost} still uses the OpenComms bundles; nothing was written. Fix it (\`opencomms doctor\` names the file), then run the command again.`,
      ),
    );
  const uses = { serverUsed: other.server, runnerUsed: other.runner };
  const rec = parseRecord(before.get(recordPath(project)) ?? null);
  const plan =
    host === CLAUDE ? planClaudeUninstall(project, before, uses, rec) : planCodexUninstall(project, before, uses, rec);
  return runPlan(
    project,
    host,
    plan,
    before,
    (c) => `Removed OpenComms from ${host}: ${relative(project, c)}. State, pins and archives are kept.`,
  );
}

export interface MemberOptions {
  host?: string;
  id?: string;
}

export async function installMember(project: string, o: MemberOptions = {}): Promise<CommandResult> {
  const host = o.host ?? CLAUDE;
  if (!HOST_LABEL_RE.test(host) || host === 'generic')
    return outcome(refuse('invalid_argument', `--host must be a host label (${HOST_LABEL_RE}), not "generic".`));
  if (o.id !== undefined && !isMemberId(o.id))
    return outcome(refuse('invalid_member_id', `A member id must match ${MEMBER_ID_RE}; nothing was written.`));
  const unusable = unusableStateDir(project);
  if (unusable) return outcome(unusable);
  const paths = resolvePaths(project);
  if (o.id === undefined && (await listPins(paths)).pins.some((p) => p.host === host))
    return outcome(
      refuse(
        'pins_exist',
        `${host} already has a pinned member in this project. Pass --id <member_id> to add another member, or reuse the existing pin.`,
      ),
    );
  const id = o.id ?? newMemberId();
  const existing = await readPin(paths, id);
  if (existing && existing.host !== host)
    return outcome(
      refuse(
        'pin_conflict',
        `Member ${id} is pinned to host ${existing.host}; one member id serves one host. Choose another --id.`,
      ),
    );

  // The host's MCP config still holding the placeholder gets the id (parsed before any write).
  const target = host === CLAUDE ? claudePaths(project).mcp : host === CODEX ? codexPaths(project).config : null;
  const before = await readTargets(target ? [target] : []);
  const filled = target ? fillPlaceholder(target, before.get(target) ?? null, host, id) : null;
  if (isRefusal(filled)) return outcome(filled);
  await ensureDir(paths); // with its .gitignore: pins are this checkout's, never committed
  if (!existing) await writePin(paths, { member_id: id, host });
  if (filled) await applyChanges([{ path: target!, content: filled }], before);
  const where = target
    ? recipe(host, id, target.slice(project.length + 1), filled !== null, before.get(target) != null)
    : `Set OPENCOMMS_MEMBER_ID=${id} in the environment of this member's MCP server.`;
  return outcome(
    ok(`${existing ? 'Already pinned' : 'Pinned'}: member ${id} for ${host}. ${where}`, {
      member_id: id,
      host,
      changed: !existing || filled !== null,
    }),
  );
}

/** What the user does next so that a session runs as this member: the installed config takes the
 *  session's OPENCOMMS_MEMBER_ID first and the pin it names second. */
function recipe(host: string, id: string, file: string, filled: boolean, installed: boolean): string {
  const bin = host === CLAUDE ? 'claude' : 'codex';
  const start = `start its session as \`OPENCOMMS_MEMBER_ID=${id} ${bin}\` (the MCP server and the hooks take the session's own id)`;
  if (filled)
    return `${file} now names it as the member of every ${host} session started without OPENCOMMS_MEMBER_ID; to run several members side by side, ${start}.`;
  if (!installed) return `Run \`opencomms install ${host}\`, then ${start}.`;
  return `To run this member, ${start}.`;
}

/** The config text with the placeholder replaced by `id`; null when no placeholder is left. */
function fillPlaceholder(path: string, text: string | null, host: string, id: string): string | null | Refusal {
  if (text === null) return null;
  if (host === CLAUDE) {
    const cfg = parseObject(text);
    if (!cfg) return malformed(path, 'is not a valid JSON object');
    const server = isObject(cfg.mcpServers) ? cfg.mcpServers.opencomms : undefined;
    const env = isObject(server) && isObject(server.env) ? server.env : undefined;
    return pinnedIn(env?.[MEMBER_ID_VAR]) === MEMBER_ID_PLACEHOLDER
      ? replace(text, ['mcpServers', 'opencomms', 'env', MEMBER_ID_VAR], claudeMemberValue(id))
      : null;
  }
  const toml = parseToml(text);
  if (!toml) return malformed(path, 'is not valid TOML');
  const range =
    placeholderRange(toml.ast, MEMBER_ID_PLACEHOLDER, PINNED_ID_VAR) ??
    placeholderRange(toml.ast, MEMBER_ID_PLACEHOLDER, MEMBER_ID_VAR);
  return range ? text.slice(0, range[0]) + tomlString(id) + text.slice(range[1]) : null;
}

/** Host session ids as the hosts mint them (uuids); anything else is a typo. */
const HOST_SESSION_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export async function bindSession(
  project: string,
  o: { host?: string; session?: string; id?: string },
): Promise<CommandResult> {
  const host = o.host ?? CODEX;
  if (!o.session || !HOST_SESSION_RE.test(o.session))
    return outcome(
      refuse(
        'invalid_argument',
        `--session <id> is required: the ${host} session (Codex: the thread id that \`codex exec --json\` prints as thread.started).`,
      ),
    );
  const member = o.id ?? (await onlyPin(project, host));
  if (!member || !isMemberId(member))
    return outcome(
      refuse(
        'identity_unpinned',
        `No single pinned ${host} member in this project: pass --id <member_id> (see \`opencomms install-member --host ${host}\`).`,
      ),
    );
  const rt = openRuntime(project);
  try {
    return outcome(await rt.run({ op: 'bind', member, host, host_session_id: o.session }));
  } finally {
    await rt.close();
  }
}
