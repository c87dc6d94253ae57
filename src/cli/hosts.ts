// The host commands of the CLI (FEATURES.md §8.1, §8.3, §9): install / uninstall <host>,
// install-member, bind. Each returns a ToolResult and its exit code; the dispatcher only prints.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { HOST as CLAUDE, claudePaths, claudeUses, planClaudeInstall, planClaudeUninstall } from '../../adapters/claude-code/install.ts';
import { HOST as CODEX, codexPaths, codexUses, planCodexInstall, planCodexUninstall } from '../../adapters/codex/install.ts';
import { parseToml, placeholderRange, tomlString } from '../../adapters/codex/config-toml.ts';
import { allBundles } from '../../adapters/install/bundles.ts';
import { applyChanges, readTargets } from '../../adapters/install/files.ts';
import { isObject, parseObject, replace } from '../../adapters/install/json.ts';
import { MEMBER_ID_PLACEHOLDER, memberEnv } from '../../adapters/install/member-env.ts';
import { isRefusal, malformed, type InstallPlan } from '../../adapters/install/plan.ts';
import { HOST_LABEL_RE, isMemberId, MEMBER_ID_RE, newMemberId } from '../protocol/ids.ts';
import { ok, refuse, type Refusal, type ToolResult } from '../protocol/result.ts';
import { ensureDir, listPins, readPin, resolvePaths, writePin } from '../store/index.ts';
import { openRuntime } from '../runtime/runtime.ts';
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

/** The CLI's version line, or null when it cannot be run (informational, §8.1). */
export const detectCli: Detect = (bin) =>
  new Promise((res) => {
    const win = process.platform === 'win32';
    const [file, args] = win ? ['cmd.exe', ['/d', '/s', '/c', `${bin} --version`]] : [bin, ['--version']];
    execFile(file, args, { timeout: DETECT_TIMEOUT_MS, windowsHide: true }, (err, stdout) => res(err ? null : stdout.trim().split('\n')[0] ?? ''));
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

async function runPlan(project: string, plan: InstallPlan | Refusal, before: Map<string, string | null>, done: (changed: string[]) => string): Promise<CommandResult> {
  if (isRefusal(plan)) return outcome(plan);
  // `.opencomms/` is created the store's way (with its .gitignore) before a bundle lands in it.
  if (plan.changes.some((c) => c.content !== null)) await ensureDir(resolvePaths(project));
  const changed = await applyChanges(plan.changes, before);
  return outcome(ok([done(changed), ...plan.notes].join('\n'), { changed }));
}

const relative = (project: string, paths: string[]) => paths.map((p) => p.slice(project.length + 1)).join(', ') || 'nothing (already up to date)';

export async function install(host: string | undefined, project: string, o: HostOptions = {}): Promise<CommandResult> {
  const warn = o.warn ?? (() => {});
  const detect = o.detect ?? detectCli;
  switch (host) {
    case 'opencode': {
      const { installOpenCode } = await import('../../adapters/opencode/install.ts');
      return outcome(await installOpenCode(project, warn));
    }
    case CLAUDE:
    case CODEX: {
      const bin = host === CLAUDE ? 'claude' : 'codex';
      if ((await detect(bin)) === null) warn(`\`${bin} --version\` did not run: ${host} is installed for this project anyway.`);
      const p = host === CLAUDE ? claudePaths(project) : codexPaths(project);
      const before = await readTargets(Object.values(p));
      const bundles = await allBundles();
      const pin = await onlyPin(project, host);
      const plan = host === CLAUDE ? planClaudeInstall(project, before, bundles, pin) : planCodexInstall(project, before, bundles, pin);
      return runPlan(project, plan, before, (c) => `Installed OpenComms for ${host}: ${relative(project, c)}.`);
    }
    case 'claude-desktop': {
      const config = { mcpServers: { opencomms: { command: process.execPath, args: [join(PACKAGE_ROOT, 'bin', 'opencomms.js'), 'mcp', '--project', project, '--host', 'claude-desktop'], env: memberEnv(null) } } };
      return outcome(ok(`Claude Desktop is configured by hand; nothing was written. Add this to its claude_desktop_config.json (then set the member id with \`opencomms install-member --host claude-desktop\`):\n${JSON.stringify(config, null, 2)}`, config));
    }
    case 'chatgpt':
      return outcome(refuse('host_not_installable', 'ChatGPT needs a networked MCP transport, which OpenComms does not ship (it never listens beyond loopback). Use claude-code, codex or opencode.'));
    default:
      return outcome(refuse('invalid_argument', `install supports: ${INSTALLABLE.join(', ')}${host ? ` (not "${host}")` : ''}.`));
  }
}

export async function uninstall(host: string | undefined, project: string): Promise<CommandResult> {
  if (host === 'opencode') {
    const { uninstallOpenCode } = await import('../../adapters/opencode/install.ts');
    return outcome(await uninstallOpenCode(project));
  }
  if (host !== CLAUDE && host !== CODEX)
    return outcome(refuse('invalid_argument', `uninstall supports: opencode, ${CLAUDE}, ${CODEX}${host ? ` (not "${host}")` : ''}.`));
  const before = await readTargets([...Object.values(claudePaths(project)), ...Object.values(codexPaths(project))]);
  // The two hosts share the server bundle and the hook runner: each stays while the other uses it.
  const other = host === CLAUDE ? codexUses(before, project) : claudeUses(before, project);
  const uses = { serverUsed: other.server, runnerUsed: other.runner };
  const plan = host === CLAUDE ? planClaudeUninstall(project, before, uses) : planCodexUninstall(project, before, uses);
  return runPlan(project, plan, before, (c) => `Removed OpenComms from ${host}: ${relative(project, c)}. State, pins and archives are kept.`);
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
  const paths = resolvePaths(project);
  if (o.id === undefined && (await listPins(paths)).pins.some((p) => p.host === host))
    return outcome(refuse('pins_exist', `${host} already has a pinned member in this project. Pass --id <member_id> to add another member, or reuse the existing pin.`));
  const id = o.id ?? newMemberId();
  const existing = await readPin(paths, id);
  if (existing && existing.host !== host)
    return outcome(refuse('pin_conflict', `Member ${id} is pinned to host ${existing.host}; one member id serves one host. Choose another --id.`));

  // The host's MCP config still holding the placeholder gets the id (parsed before any write).
  const target = host === CLAUDE ? claudePaths(project).mcp : host === CODEX ? codexPaths(project).config : null;
  const before = await readTargets(target ? [target] : []);
  const filled = target ? fillPlaceholder(target, before.get(target) ?? null, host, id) : null;
  if (isRefusal(filled)) return outcome(filled);
  if (!existing) await writePin(paths, { member_id: id, host });
  if (filled) await applyChanges([{ path: target!, content: filled }], before);
  const where = filled ? `${target!.slice(project.length + 1)} now names it.` : `Set OPENCOMMS_MEMBER_ID=${id} in the environment of this member's MCP server.`;
  return outcome(ok(`${existing ? 'Already pinned' : 'Pinned'}: member ${id} for ${host}. ${where}`, { member_id: id, host, changed: !existing || filled !== null }));
}

/** The config text with the placeholder replaced by `id`; null when no placeholder is left. */
function fillPlaceholder(path: string, text: string | null, host: string, id: string): string | null | Refusal {
  if (text === null) return null;
  if (host === CLAUDE) {
    const cfg = parseObject(text);
    if (!cfg) return malformed(path, 'is not a valid JSON object');
    const server = isObject(cfg.mcpServers) ? cfg.mcpServers.opencomms : undefined;
    const env = isObject(server) && isObject(server.env) ? server.env : undefined;
    return env?.OPENCOMMS_MEMBER_ID === MEMBER_ID_PLACEHOLDER ? replace(text, ['mcpServers', 'opencomms', 'env', 'OPENCOMMS_MEMBER_ID'], id) : null;
  }
  const toml = parseToml(text);
  if (!toml) return malformed(path, 'is not valid TOML');
  const range = placeholderRange(toml.ast, MEMBER_ID_PLACEHOLDER);
  return range ? text.slice(0, range[0]) + tomlString(id) + text.slice(range[1]) : null;
}

/** Host session ids as the hosts mint them (uuids); anything else is a typo. */
const HOST_SESSION_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export async function bindSession(project: string, o: { host?: string; session?: string; id?: string }): Promise<CommandResult> {
  const host = o.host ?? CODEX;
  if (!o.session || !HOST_SESSION_RE.test(o.session))
    return outcome(refuse('invalid_argument', `--session <id> is required: the ${host} session (Codex: the thread id that \`codex exec --json\` prints as thread.started).`));
  const member = o.id ?? (await onlyPin(project, host));
  if (!member || !isMemberId(member))
    return outcome(refuse('identity_unpinned', `No single pinned ${host} member in this project: pass --id <member_id> (see \`opencomms install-member --host ${host}\`).`));
  const rt = openRuntime(project);
  try {
    return outcome(await rt.run({ op: 'bind', member, host, host_session_id: o.session }));
  } finally {
    await rt.close();
  }
}
