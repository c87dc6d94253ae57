// `opencomms install codex` / `uninstall codex` as pure plans (hosts.md "Installers"; operator.md "Command line", and beyond
// the seed: Codex 0.171 runs hooks, so the same hook runner is registered in `.codex/hooks.json`).
// Codex loads project config and project hooks only for a trusted project, and runs a hook only
// once it is reviewed (`/hooks`) or under `--dangerously-bypass-hook-trust`: the plan says so.
import { join } from 'node:path';
import type { Refusal } from '../../src/protocol/result.ts';
import {
  HOOK_RUNNER,
  MCP_BUNDLE,
  HOST_BUNDLES,
  RUNNER_BUNDLES,
  bundlePaths,
  removeBundles,
  writeBundles,
  type BundleName,
} from '../install/bundles.ts';
import type { FileChange } from '../install/files.ts';
import {
  hooksShapeError,
  registerHooks,
  registersRunner,
  unregisterHooks,
  type HookGroup,
} from '../install/hook-config.ts';
import { isObject, newJsonFile, parseObject } from '../install/json.ts';
import {
  codexMemberEnv,
  PG_NOTE,
  PG_PASSWORD_VARS,
  MEMBER_ID_PLACEHOLDER,
  MEMBER_ID_VAR,
  OLD_ROLE_VALUE,
  OLD_ROLE_VAR,
  PINNED_ID_VAR,
  PROJECT_ARG,
  relBundle,
  serverArgs,
  isOurServer,
} from '../install/member-env.ts';
import { foreignNote, isRefusal, malformed, type InstallPlan } from '../install/plan.ts';
import { containerKey, created, emptyRecord, type InstallRecord } from '../install/record.ts';
import {
  appendServer,
  ownPart,
  parseToml,
  removeServer,
  serverOf,
  serversShapeError,
  userKeyLines,
} from './config-toml.ts';
import { shellQuote } from './shell.ts';

export const HOST = 'codex';

export const codexPaths = (project: string) => ({
  config: join(project, '.codex', 'config.toml'),
  hooks: join(project, '.codex', 'hooks.json'),
  ...bundlePaths(project),
});

/** Codex's default hook timeout is 600 s; the runner answers in tens of ms, so 15 s as for Claude. */
const HOOK_TIMEOUT_S = 15;

/** Codex sets no project variable for hooks, and runs them and the MCP server in the directory the
 *  session started in (the project: Codex loads `.codex/` there only for a trusted project), so the
 *  runner and the project are named relative to it. */
export function codexHookGroups(platform = process.platform): Record<string, HookGroup> {
  const command = ['node', relBundle(HOOK_RUNNER), 'auto', PROJECT_ARG, '--host', HOST]
    .map((a) => shellQuote(a, platform))
    .join(' ');
  const group = { hooks: [{ type: 'command' as const, command, timeout: HOOK_TIMEOUT_S }] };
  return { SessionStart: group, UserPromptSubmit: group, Stop: group };
}

const REL = { config: '.codex/config.toml', hooks: '.codex/hooks.json' } as const;

/** What Codex 0.171.0 does with OpenComms' tools (test/real/codex-approvals.test.ts). The install
 *  writes no approval: that is the user's decision about what the model may do without asking, a
 *  project config is often committed (an approval written there holds for every teammate), and the
 *  tools change what peers see (send, pause, kick, delete a saved channel). It keeps the ones the
 *  user gives. */
export const APPROVAL_NOTE =
  'Codex asks before each OpenComms tool call until you approve it ("Allow and don\'t ask me again" writes [mcp_servers.opencomms.tools.<tool>] approval_mode = "approve" into .codex/config.toml, and installs keep it). Under approval_policy = "never" and in `codex exec` (spawn_push) nobody is asked and an unapproved call is refused: approve the tools first, or add default_tools_approval_mode = "approve" under [mcp_servers.opencomms].';

/** The pinned id an existing entry of ours names (this form or the older literal OPENCOMMS_MEMBER_ID). */
export function pinnedOf(entry: unknown): string | null {
  const env = isObject(entry) && isObject(entry.env) ? entry.env : {};
  const v = env[PINNED_ID_VAR] ?? env[MEMBER_ID_VAR];
  return typeof v === 'string' && v !== MEMBER_ID_PLACEHOLDER ? v : null;
}

/** `required`: Codex builds a turn's tool list without an optional server that has not answered
 *  `tools/list` within `mcp_optional_startup_grace_ms` (1 s by default), and `codex exec` has one
 *  turn, so a server slower than that to start is silently absent for the whole run. A required
 *  server is waited for up to its `startup_timeout_sec` (10 s by default), and a server that cannot
 *  start at all stops Codex with an error instead of leaving a session without its channels. */
const serverEntry = (pin: string | null, pg: boolean) => ({
  command: 'node',
  args: serverArgs(HOST),
  cwd: PROJECT_ARG,
  required: true,
  env_vars: pg ? [MEMBER_ID_VAR, ...PG_PASSWORD_VARS] : [MEMBER_ID_VAR],
  env: codexMemberEnv(pin),
});
/** Does an entry of ours pass the password variables already (kept once there)? */
const passesPg = (entry: unknown) =>
  isObject(entry) && Array.isArray(entry.env_vars) && entry.env_vars.includes(PG_PASSWORD_VARS[0]);
/** Key order aside, the same value (TOML tables have no order a reader relies on). */
const canonical = (v: unknown): unknown =>
  isObject(v)
    ? Object.fromEntries(
        Object.keys(v)
          .sort()
          .map((k) => [k, canonical(v[k])]),
      )
    : Array.isArray(v)
      ? v.map(canonical)
      : v;
const sameJson = (a: unknown, b: unknown) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

/** config.toml with our server: appended when absent; an entry of ours whose own keys differ
 *  (another checkout's path, an older form) rewritten in place of the old one. Only the keys
 *  OpenComms writes are compared and rewritten: the user's tool approvals in the entry (Codex's
 *  `[mcp_servers.opencomms.tools.<tool>]` tables, `default_tools_approval_mode`, …) keep their bytes,
 *  the tables where they stand and the keys inside the rewritten table. */
function editServer(
  text: string,
  toml: ReturnType<typeof parseToml>,
  pin: string | null,
  pg: boolean,
): { text: string; repaired: boolean; foreign: boolean } | Refusal {
  const cur = toml ? serverOf(toml.value) : undefined;
  if (cur !== undefined && !isOurServer(cur)) return { text, repaired: false, foreign: true };
  const want = serverEntry(pinnedOf(cur) ?? pin, pg || passesPg(cur));
  // An older install's `OPENCOMMS_MEMBER_ROLE = "<role label>"` goes with the rewrite; a value the
  // user gave that variable stays.
  const role = isObject(cur) && isObject(cur.env) ? cur.env[OLD_ROLE_VAR] : undefined;
  if (typeof role === 'string' && role !== OLD_ROLE_VALUE) (want.env as Record<string, string>)[OLD_ROLE_VAR] = role;
  if (cur !== undefined && sameJson(ownPart(cur), want)) return { text, repaired: false, foreign: false };
  const out =
    cur !== undefined && toml
      ? appendServer(removeServer(text, toml.ast, true), want, userKeyLines(text, toml.ast))
      : appendServer(text, want);
  const check = parseToml(out);
  if (!check || !isOurServer(serverOf(check.value)))
    return malformed(
      REL.config,
      'defines mcp_servers in a form a new [mcp_servers.opencomms] table cannot join (an inline table)',
    );
  return { text: out, repaired: cur !== undefined, foreign: false };
}

export function planCodexInstall(
  project: string,
  files: Map<string, string | null>,
  bundles: Record<BundleName, string>,
  pin: string | null,
  pg = false,
): InstallPlan | Refusal {
  const p = codexPaths(project);
  const tomlText = files.get(p.config) ?? null;
  const toml = tomlText === null ? null : parseToml(tomlText);
  if (tomlText !== null && !toml) return malformed(p.config, 'is not valid TOML');
  const shape = toml && serversShapeError(toml.value);
  if (shape) return malformed(p.config, shape);
  const hooksText = files.get(p.hooks) ?? null;
  const hooks = hooksText === null ? {} : parseObject(hooksText);
  if (!hooks) return malformed(p.hooks, 'is not a valid JSON object');
  const hookShape = hooksShapeError(hooks);
  if (hookShape) return malformed(p.hooks, hookShape);

  const server = editServer(tomlText ?? '', toml, pin, pg);
  if (isRefusal(server)) return server;
  const hooksOut = registerHooks(hooksText ?? '{}\n', hooks, codexHookGroups());
  const created = [
    ...(tomlText === null ? [REL.config] : []),
    ...(hooksText === null ? [REL.hooks] : hooksOut.created.map((k) => containerKey(REL.hooks, k))),
  ];
  return {
    changes: [
      ...writeBundles(project, HOST_BUNDLES, bundles),
      { path: p.config, content: server.text },
      { path: p.hooks, content: hooksText === null ? newJsonFile(parseObject(hooksOut.text)!) : hooksOut.text },
    ],
    notes: [
      `Codex reads ${join('.codex', 'config.toml')} and ${join('.codex', 'hooks.json')} only in a trusted project: run /trust in Codex here, or move the [mcp_servers.opencomms] section to ~/.codex/config.toml.`,
      'Codex runs a project hook only after you review it: open /hooks in Codex and trust the three OpenComms hooks (or start Codex with --dangerously-bypass-hook-trust).',
      'Codex starts the MCP server and the hooks in the directory it was started in: start it at the project root.',
      APPROVAL_NOTE,
      ...(server.foreign ? [foreignNote(`${REL.config} already has an [mcp_servers.opencomms]`)] : []),
      ...(pg ? [PG_NOTE] : []),
      pin
        ? `The MCP server runs as the session's OPENCOMMS_MEMBER_ID when it is set, else as member ${pin}.`
        : "Next: `opencomms install-member --host codex` gives this project's Codex sessions their member id.",
    ],
    record: { created },
    repaired: [
      ...(server.repaired ? [`${REL.config} [mcp_servers.opencomms]`] : []),
      ...hooksOut.repaired.map((e) => `${REL.hooks} hooks.${e}`),
    ],
  };
}

export function planCodexUninstall(
  project: string,
  files: Map<string, string | null>,
  others: { serverUsed: boolean; runnerUsed: boolean },
  rec: InstallRecord = emptyRecord(),
): InstallPlan | Refusal {
  const p = codexPaths(project);
  const ours = (key: string) => created(rec, HOST, key);
  const changes: FileChange[] = [];
  const notes: string[] = [];
  const tomlText = files.get(p.config) ?? null;
  if (tomlText !== null) {
    const toml = parseToml(tomlText);
    if (!toml) return malformed(p.config, 'is not valid TOML');
    const entry = serverOf(toml.value);
    if (isOurServer(entry)) {
      const out = removeServer(tomlText, toml.ast);
      changes.push({ path: p.config, content: out.trim() === '' && ours(REL.config) ? null : out });
    } else if (entry !== undefined)
      notes.push(`${REL.config}: the [mcp_servers.opencomms] there was not written by OpenComms and is left as it is.`);
  }
  const hooksText = files.get(p.hooks) ?? null;
  if (hooksText !== null) {
    const hooks = parseObject(hooksText);
    if (!hooks) return malformed(p.hooks, 'is not a valid JSON object');
    const out = unregisterHooks(hooksText, hooks, (path) => ours(containerKey(REL.hooks, path)));
    const left = parseObject(out);
    if (out !== hooksText)
      changes.push({ path: p.hooks, content: left && Object.keys(left).length === 0 && ours(REL.hooks) ? null : out });
  }
  if (!others.runnerUsed) changes.push(...removeBundles(project, RUNNER_BUNDLES, files));
  if (!others.serverUsed) changes.push(...removeBundles(project, [MCP_BUNDLE], files));
  return { changes, notes, record: { forget: true } };
}

/** Does the Codex config still use the server bundle / the hook runner? null when a file is
 *  malformed: then nobody can tell, and a shared bundle must not be removed. */
export function codexUses(
  files: Map<string, string | null>,
  project: string,
): { server: boolean; runner: boolean } | null {
  const p = codexPaths(project);
  const tomlText = files.get(p.config) ?? null;
  const hooksText = files.get(p.hooks) ?? null;
  const toml = tomlText === null ? null : parseToml(tomlText);
  const hooks = hooksText === null ? null : parseObject(hooksText);
  if ((tomlText !== null && !toml) || (hooksText !== null && !hooks)) return null;
  return { server: toml !== null && isOurServer(serverOf(toml.value)), runner: registersRunner(hooks) };
}
