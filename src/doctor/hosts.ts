// Per-host install state as the installers write it (hosts.md "OpenCode", "Installers") and the member ids they
// name (hosts.md "Installers"). Each host's whole install is checked (config entries, hooks, the bundles they start);
// a host with none of its entries is "not installed" and never fails; an entry that names a path
// outside this project (a moved or copied project) fails with the command that repairs it. Doctor
// reads these files only; it never writes them except the one OpenCode re-registration doctor --fix may make.
// No id is printed in full (operator.md "Command line").
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import { claudeHookGroups, claudePaths } from '../../adapters/claude-code/install.ts';
import { parseToml, serverOf } from '../../adapters/codex/config-toml.ts';
import { codexHookGroups, codexPaths } from '../../adapters/codex/install.ts';
import { HOOK_RUNNER, RUNNER_BUNDLES, MCP_BUNDLE } from '../../adapters/install/bundles.ts';
import { isObject, parseObject, type JsonObject } from '../../adapters/install/json.ts';
import {
  followsSession,
  MEMBER_ID_PLACEHOLDER,
  MEMBER_ID_VAR,
  PINNED_ID_VAR,
  pinnedIn,
  relBundle,
  isOurServer,
} from '../../adapters/install/member-env.ts';
import { bundleState, planConfig, PLUGIN_PATH } from '../../adapters/opencode/install.ts';
import type { Pin } from '../store/index.ts';
import { row, shortId, type Row } from './files.ts';

export { MEMBER_ID_PLACEHOLDER };

type Parsed<T> = { kind: 'absent' } | { kind: 'bad' } | { kind: 'ok'; value: T };

function readText(file: string): string | null {
  try {
    return existsSync(file) ? readFileSync(file, 'utf8') : null;
  } catch {
    return null; // a directory or an unreadable file: the host cannot read it either
  }
}

function readJson(file: string): Parsed<JsonObject> {
  const text = readText(file);
  if (text === null) return { kind: 'absent' };
  const value = parseObject(text);
  return value ? { kind: 'ok', value } : { kind: 'bad' };
}

export function opencodeRows(project: string): Row[] {
  const bundle = bundleState(project);
  const plan = planConfig(project);
  if ('ok' in plan) return [row('FAIL', 'opencode', plan.message)];
  const hasConfig = plan.original !== null;
  if (bundle === 'absent' && !plan.registered) return [row('OK', 'opencode', 'not installed')];
  if (bundle === 'absent')
    return [
      row(
        'FAIL',
        'opencode',
        `${PLUGIN_PATH} is registered in ${plan.path.slice(project.length + 1)} but missing; run \`opencomms install opencode\``,
      ),
    ];
  const rows: Row[] = [];
  if (bundle === 'foreign')
    rows.push(
      row(
        'WARN',
        'opencode',
        `${PLUGIN_PATH} was not written by OpenComms; \`opencomms install opencode\` replaces it`,
      ),
    );
  rows.push(
    plan.registered
      ? row('OK', 'opencode', `plugin bundle present and registered in ${plan.path.slice(project.length + 1)}`)
      : row(
          'FAIL',
          'opencode',
          `plugin bundle present but not registered in ${hasConfig ? plan.path.slice(project.length + 1) : 'opencode.json'}; \`opencomms doctor --fix\` re-registers it`,
        ),
  );
  return rows;
}

/** Hook events of `groups` whose registration in `cfg` runs our hook runner. */
function hookedEvents(cfg: JsonObject | null, events: string[]): string[] {
  const hooks = cfg && isObject(cfg.hooks) ? cfg.hooks : {};
  return events.filter((ev) => JSON.stringify(hooks[ev] ?? null).includes(HOOK_RUNNER));
}

/** String leaves of a parsed config value. */
const strings = (v: unknown): string[] =>
  typeof v === 'string'
    ? [v]
    : Array.isArray(v)
      ? v.flatMap(strings)
      : isObject(v)
        ? Object.values(v).flatMap(strings)
        : [];

/** Absolute paths into a `.opencomms/` folder outside this project, in an entry (an args element,
 *  or a quoted word of a hook command): the entry was written for another checkout (a moved or
 *  copied project) and would start that checkout's files. */
function outsidePaths(project: string, entry: unknown): string[] {
  const found = new Set<string>();
  for (const s of strings(entry))
    for (const c of [s, ...s.split(/['"]/)].map((x) => x.trim())) {
      if (!isAbsolute(c) || !/[\\/]\.opencomms[\\/]/.test(c)) continue;
      const rel = relative(project, c);
      if (rel.startsWith('..') || isAbsolute(rel)) found.add(c);
    }
  return [...found];
}

interface HostFacts {
  host: string;
  /** Files the host reads that are malformed. */
  bad: string[];
  /** What is present of the install, by what it is; false = missing. */
  parts: Record<string, boolean>;
  /** Any entry of ours (a hook or the server entry): a host without one is not installed. */
  installed: boolean;
  outside: string[];
  foreign?: string;
}

const bundlesPresent = (project: string, names: readonly string[]) =>
  Object.fromEntries(names.map((n) => [relBundle(n), existsSync(join(project, '.opencomms', n))]));

function claudeFacts(project: string): HostFacts {
  const p = claudePaths(project);
  const settings = readJson(p.settings);
  const mcp = readJson(p.mcp);
  const events = Object.keys(claudeHookGroups());
  const hooked = hookedEvents(settings.kind === 'ok' ? settings.value : null, events);
  const entry = mcp.kind === 'ok' && isObject(mcp.value.mcpServers) ? mcp.value.mcpServers.opencomms : undefined;
  const ours = isOurServer(entry);
  const parts: Record<string, boolean> = {
    [`hooks in .claude/settings.json (${events.length} events)`]: hooked.length === events.length,
    'mcpServers.opencomms in .mcp.json': ours,
  };
  if (hooked.length) Object.assign(parts, bundlesPresent(project, RUNNER_BUNDLES));
  if (ours) Object.assign(parts, bundlesPresent(project, [MCP_BUNDLE]));
  return {
    host: 'claude-code',
    bad: [settings.kind === 'bad' && '.claude/settings.json', mcp.kind === 'bad' && '.mcp.json'].filter(
      (f): f is string => !!f,
    ),
    parts,
    installed: hooked.length > 0 || ours,
    outside: [
      ...outsidePaths(project, ours ? entry : null),
      ...outsidePaths(project, settings.kind === 'ok' ? settings.value.hooks : null),
    ],
    foreign:
      entry !== undefined && !ours ? '.mcp.json holds an "opencomms" server that OpenComms did not write' : undefined,
  };
}

function codexFacts(project: string): HostFacts {
  const p = codexPaths(project);
  const tomlText = readText(p.config);
  const toml = tomlText === null ? null : parseToml(tomlText);
  const hooks = readJson(p.hooks);
  const events = Object.keys(codexHookGroups());
  const hooked = hookedEvents(hooks.kind === 'ok' ? hooks.value : null, events);
  const entry = toml ? serverOf(toml.value) : undefined;
  const ours = isOurServer(entry);
  const parts: Record<string, boolean> = {
    '[mcp_servers.opencomms] in .codex/config.toml': ours,
    [`hooks in .codex/hooks.json (${events.length} events)`]: hooked.length === events.length,
  };
  if (hooked.length) Object.assign(parts, bundlesPresent(project, RUNNER_BUNDLES));
  if (ours) Object.assign(parts, bundlesPresent(project, [MCP_BUNDLE]));
  return {
    host: 'codex',
    bad: [tomlText !== null && !toml && '.codex/config.toml', hooks.kind === 'bad' && '.codex/hooks.json'].filter(
      (f): f is string => !!f,
    ),
    parts,
    installed: hooked.length > 0 || ours,
    outside: [
      ...outsidePaths(project, ours ? entry : null),
      ...outsidePaths(project, hooks.kind === 'ok' ? hooks.value.hooks : null),
    ],
    foreign:
      entry !== undefined && !ours
        ? '.codex/config.toml holds an [mcp_servers.opencomms] that OpenComms did not write'
        : undefined,
  };
}

function factRows(f: HostFacts): Row[] {
  const fix = `run \`opencomms install ${f.host}\``;
  if (f.bad.length)
    return [
      row('FAIL', f.host, `${f.bad.join(', ')} is malformed, so ${f.host} cannot read it either; fix it, then ${fix}`),
    ];
  const rows: Row[] = f.foreign
    ? [row('WARN', f.host, `${f.foreign}; it is left alone, and OpenComms' own server is not configured`)]
    : [];
  if (!f.installed) return [...rows, row('OK', f.host, 'not installed')];
  const missing = Object.entries(f.parts)
    .filter(([, present]) => !present)
    .map(([what]) => what);
  if (missing.length) rows.push(row('FAIL', f.host, `incomplete install, missing: ${missing.join('; ')}; ${fix}`));
  if (f.outside.length)
    rows.push(
      row(
        'FAIL',
        f.host,
        `the config names paths outside this project (${f.outside.join(', ')}): it was written for another checkout; ${fix} to repair it`,
      ),
    );
  if (!missing.length && !f.outside.length) rows.push(row('OK', f.host, `${Object.keys(f.parts).join(', ')} present`));
  return rows;
}

export const claudeRows = (project: string): Row[] => factRows(claudeFacts(project));
export const codexRows = (project: string): Row[] => factRows(codexFacts(project));

/** How each installed MCP entry picks its member: the value that names the pin, and whether the
 *  session's own OPENCOMMS_MEMBER_ID can override it. */
function identities(project: string): Array<{ host: string; where: string; pinned: unknown; perSession: boolean }> {
  const out = [];
  const mcp = readJson(claudePaths(project).mcp);
  const claude = mcp.kind === 'ok' && isObject(mcp.value.mcpServers) ? mcp.value.mcpServers.opencomms : undefined;
  if (isOurServer(claude) && isObject(claude)) {
    const v = isObject(claude.env) ? claude.env[MEMBER_ID_VAR] : undefined;
    out.push({
      host: 'claude-code',
      where: 'claude-code (.mcp.json)',
      pinned: v === undefined ? undefined : pinnedIn(v),
      perSession: v === undefined || followsSession(v),
    });
  }
  const toml = parseToml(readText(codexPaths(project).config) ?? '');
  const codex = toml ? serverOf(toml.value) : undefined;
  if (isOurServer(codex) && isObject(codex)) {
    const env = isObject(codex.env) ? codex.env : {};
    const passes =
      Array.isArray(codex.env_vars) && codex.env_vars.includes(MEMBER_ID_VAR) && env[MEMBER_ID_VAR] === undefined;
    out.push({
      host: 'codex',
      where: 'codex (.codex/config.toml)',
      pinned: env[PINNED_ID_VAR] ?? env[MEMBER_ID_VAR],
      perSession: passes,
    });
  }
  return out;
}

/** A member id still set to the installer's placeholder FAILs until install-member sets it;
 *  several pinned members of one host whose config can only ever start one of them FAIL too. */
export function memberIdRows(project: string, pins: Pin[]): Row[] {
  const ids = identities(project);
  if (!ids.length) return [row('OK', 'member ids', 'no MCP host config to check')];
  return ids.flatMap(({ host, where, pinned, perSession }) => {
    const rows: Row[] = [];
    const count = pins.filter((p) => p.host === host).length;
    if (count > 1 && !perSession)
      rows.push(
        row(
          'FAIL',
          'member ids',
          `${where}: ${count} members are pinned for ${host}, but the config always starts the same one; run \`opencomms install ${host}\` so that each session's OPENCOMMS_MEMBER_ID decides`,
        ),
      );
    if (pinned === MEMBER_ID_PLACEHOLDER)
      rows.push(
        row(
          'FAIL',
          'member ids',
          `${where}: the pinned member is still the placeholder; run \`opencomms install-member --host ${host}\``,
        ),
      );
    else if (typeof pinned === 'string' && pinned.trim())
      rows.push(
        row('OK', 'member ids', `${where}: ${shortId(pinned)}${perSession ? ', unless the session sets its own' : ''}`),
      );
    else
      rows.push(
        row(
          'WARN',
          'member ids',
          `${where}: no member id pinned; a session without OPENCOMMS_MEMBER_ID is refused every tool call (identity_unpinned)`,
        ),
      );
    return rows;
  });
}
