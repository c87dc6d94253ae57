// Per-host install state as the installers write it (FEATURES.md §6.7, §8.1) and the member-id
// placeholders they leave (§8.3). Doctor reads these files; it never writes them except the one
// OpenCode re-registration §9 allows. No id is printed in full (§9, INS-7).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, type ParseError } from 'jsonc-parser';
import { bundleState, planConfig, PLUGIN_PATH } from '../../adapters/opencode/install.ts';
import { row, shortId, type Row } from './files.ts';

/** What an installer writes where a member id belongs until `opencomms install-member` sets it. */
export const MEMBER_ID_PLACEHOLDER = '<set by: opencomms install-member>';
export const CLAUDE_HOOK_EVENTS = ['SessionStart', 'UserPromptSubmit', 'Stop', 'SessionEnd'] as const;
export const HOOK_RUNNER = 'claude-code-hooks.mjs';
export const MCP_BUNDLE = '.opencomms/opencomms-mcp.mjs';
const CLAUDE_SETTINGS = '.claude/settings.json';
const MCP_JSON = '.mcp.json';
const CODEX_CONFIG = '.codex/config.toml';
const CODEX_SECTION = 'mcp_servers.opencomms';

type Json = { ok: true; value: unknown } | { ok: false } | null;

/** null = absent; ok:false = malformed (JSONC tolerated, as the hosts do). */
function readJson(file: string): Json {
  if (!existsSync(file)) return null;
  const errors: ParseError[] = [];
  const value = parse(readFileSync(file, 'utf8'), errors, { allowTrailingComma: true });
  return errors.length ? { ok: false } : { ok: true, value };
}

const get = (v: unknown, ...keys: string[]): unknown =>
  keys.reduce<unknown>((o, k) => (o !== null && typeof o === 'object' && !Array.isArray(o) ? (o as Record<string, unknown>)[k] : undefined), v);

export function opencodeRows(project: string): Row[] {
  const bundle = bundleState(project);
  const plan = planConfig(project);
  if ('ok' in plan) return [row('FAIL', 'opencode', plan.message)];
  const hasConfig = plan.original !== null;
  if (bundle === 'absent' && !plan.registered) return [row('OK', 'opencode', 'not installed')];
  if (bundle === 'absent') return [row('FAIL', 'opencode', `${PLUGIN_PATH} is registered in ${plan.path.slice(project.length + 1)} but missing; run \`opencomms install opencode\``)];
  const rows: Row[] = [];
  if (bundle === 'foreign') rows.push(row('WARN', 'opencode', `${PLUGIN_PATH} was not written by OpenComms; \`opencomms install opencode\` replaces it`));
  rows.push(
    plan.registered
      ? row('OK', 'opencode', `plugin bundle present and registered in ${plan.path.slice(project.length + 1)}`)
      : row('FAIL', 'opencode', `plugin bundle present but not registered in ${hasConfig ? plan.path.slice(project.length + 1) : 'opencode.json'}; \`opencomms doctor --fix\` re-registers it`),
  );
  return rows;
}

/** The opencomms MCP server entry of .mcp.json, and the hook events that run our hook runner. */
function claudeFacts(project: string) {
  const settings = readJson(join(project, CLAUDE_SETTINGS));
  const mcp = readJson(join(project, MCP_JSON));
  const hooked = CLAUDE_HOOK_EVENTS.filter((ev) => {
    const entries = settings?.ok ? get(settings.value, 'hooks', ev) : undefined;
    return Array.isArray(entries) && entries.some((e) => {
      const hooks = get(e, 'hooks');
      return Array.isArray(hooks) && hooks.some((h) => String(get(h, 'command') ?? '').includes(HOOK_RUNNER));
    });
  });
  const server = mcp?.ok ? get(mcp.value, 'mcpServers', 'opencomms') : undefined;
  return { settings, mcp, hooked, server };
}

export function claudeRows(project: string): Row[] {
  const f = claudeFacts(project);
  const malformed = [f.settings?.ok === false && CLAUDE_SETTINGS, f.mcp?.ok === false && MCP_JSON].filter(Boolean);
  if (malformed.length) return [row('FAIL', 'claude-code', `${malformed.join(', ')} is not valid JSON; fix it, then \`opencomms install claude-code\``)];
  const runner = existsSync(join(project, '.opencomms', HOOK_RUNNER));
  const bundle = existsSync(join(project, MCP_BUNDLE));
  const parts = { [`.opencomms/${HOOK_RUNNER}`]: runner, [`hooks in ${CLAUDE_SETTINGS}`]: f.hooked.length > 0, [`mcpServers.opencomms in ${MCP_JSON}`]: f.server !== undefined };
  if (!Object.values(parts).some(Boolean)) return [row('OK', 'claude-code', 'not installed')];
  const missing = Object.entries(parts).filter(([, present]) => !present).map(([what]) => what);
  const events = CLAUDE_HOOK_EVENTS.filter((e) => !f.hooked.includes(e));
  if (f.hooked.length && events.length) missing.push(`hooks for ${events.join(', ')}`);
  if (f.server !== undefined && !bundle) missing.push(MCP_BUNDLE);
  return missing.length
    ? [row('FAIL', 'claude-code', `incomplete install, missing: ${missing.join('; ')}; run \`opencomms install claude-code\``)]
    : [row('OK', 'claude-code', `hook runner, hooks (${CLAUDE_HOOK_EVENTS.length} events) and the .mcp.json server entry present`)];
}

/** The `[mcp_servers.opencomms*]` sections of a TOML file, line by line: enough to find the
 *  section and its member id without a TOML library (doctor only reads). */
function codexFacts(project: string) {
  const file = join(project, CODEX_CONFIG);
  if (!existsSync(file)) return { section: false, memberId: undefined as string | undefined };
  let current = '';
  let section = false;
  let memberId: string | undefined;
  for (const line of readFileSync(file, 'utf8').split(/\r?\n/)) {
    const header = /^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$/.exec(line);
    if (header) {
      current = header[1]!.replace(/\s+/g, '');
      if (current === CODEX_SECTION) section = true;
      continue;
    }
    if (current !== CODEX_SECTION && current !== `${CODEX_SECTION}.env`) continue;
    const id = /OPENCOMMS_MEMBER_ID\s*=\s*"([^"]*)"/.exec(line);
    if (id) memberId = id[1];
  }
  return { section, memberId };
}

export function codexRows(project: string): Row[] {
  const f = codexFacts(project);
  if (!f.section) return [row('OK', 'codex', 'not installed')];
  return existsSync(join(project, MCP_BUNDLE))
    ? [row('OK', 'codex', `[${CODEX_SECTION}] present in ${CODEX_CONFIG}`)]
    : [row('FAIL', 'codex', `[${CODEX_SECTION}] in ${CODEX_CONFIG} points at ${MCP_BUNDLE}, which is missing; run \`opencomms install codex\``)];
}

/** §9: a member id still set to the installer's placeholder FAILs until install-member sets it. */
export function placeholderRows(project: string): Row[] {
  const ids: [string, unknown][] = [];
  const claude = claudeFacts(project).server;
  if (claude !== undefined) ids.push([`claude-code (${MCP_JSON})`, get(claude, 'env', 'OPENCOMMS_MEMBER_ID')]);
  const codex = codexFacts(project);
  if (codex.section) ids.push([`codex (${CODEX_CONFIG})`, codex.memberId]);
  if (!ids.length) return [row('OK', 'member ids', 'no MCP host config to check')];
  return ids.map(([where, id]) =>
    id === MEMBER_ID_PLACEHOLDER
      ? row('FAIL', 'member ids', `${where}: OPENCOMMS_MEMBER_ID is still the placeholder; run \`opencomms install-member\``)
      : typeof id === 'string' && id.trim()
        ? row('OK', 'member ids', `${where}: ${shortId(id)}`)
        : row('WARN', 'member ids', `${where}: no OPENCOMMS_MEMBER_ID set; every tool call is refused (identity_unpinned)`),
  );
}
