// `opencomms install codex` / `uninstall codex` as pure plans (FEATURES.md §8.1, §9, and beyond
// the seed: Codex 0.171 runs hooks, so the same hook runner is registered in `.codex/hooks.json`).
// Codex loads project config and project hooks only for a trusted project, and runs a hook only
// once it is reviewed (`/hooks`) or under `--dangerously-bypass-hook-trust`: the plan says so.
import { join } from 'node:path';
import type { Refusal } from '../../src/protocol/result.ts';
import { HOOK_RUNNER, MCP_BUNDLE, HOST_BUNDLES, RUNNER_BUNDLES, bundlePath, bundlePaths, removeBundles, writeBundles, type BundleName } from '../install/bundles.ts';
import type { FileChange } from '../install/files.ts';
import { hooksShapeError, registerHooks, registersRunner, unregisterHooks, type HookGroup } from '../install/hook-config.ts';
import { newJsonFile, parseObject } from '../install/json.ts';
import { memberEnv, serverArgs } from '../install/member-env.ts';
import { malformed, type InstallPlan } from '../install/plan.ts';
import { appendServer, hasServer, parseToml, removeServer, serversShapeError } from './config-toml.ts';
import { shellQuote } from './shell.ts';

export const HOST = 'codex';

export const codexPaths = (project: string) => ({
  config: join(project, '.codex', 'config.toml'),
  hooks: join(project, '.codex', 'hooks.json'),
  ...bundlePaths(project),
});

/** Codex's default hook timeout is 600 s; the runner answers in tens of ms, so 15 s as for Claude. */
const HOOK_TIMEOUT_S = 15;

/** Codex sets no project variable for hooks: the runner and the project are named by absolute path. */
export function codexHookGroups(project: string, platform = process.platform): Record<string, HookGroup> {
  const command = ['node', bundlePath(project, HOOK_RUNNER), 'auto', project, '--host', HOST].map((a) => shellQuote(a, platform)).join(' ');
  const group = { hooks: [{ type: 'command' as const, command, timeout: HOOK_TIMEOUT_S }] };
  return { SessionStart: group, UserPromptSubmit: group, Stop: group };
}

export function planCodexInstall(project: string, files: Map<string, string | null>, bundles: Record<BundleName, string>, pin: string | null): InstallPlan | Refusal {
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

  let tomlOut = tomlText ?? '';
  if (!toml || !hasServer(toml.value)) {
    tomlOut = appendServer(tomlOut, { command: 'node', args: serverArgs(bundlePath(project, MCP_BUNDLE), project, HOST), cwd: '.', env: memberEnv(pin) });
    const check = parseToml(tomlOut);
    if (!check || !hasServer(check.value)) return malformed(p.config, 'defines mcp_servers in a form a new [mcp_servers.opencomms] table cannot join (an inline table)');
  }
  const hooksOut = registerHooks(hooksText ?? '{}\n', hooks, codexHookGroups(project));
  return {
    changes: [
      ...writeBundles(project, HOST_BUNDLES, bundles),
      { path: p.config, content: tomlOut },
      { path: p.hooks, content: hooksText === null ? newJsonFile(parseObject(hooksOut)!) : hooksOut },
    ],
    notes: [
      `Codex reads ${join('.codex', 'config.toml')} and ${join('.codex', 'hooks.json')} only in a trusted project: run /trust in Codex here, or move the [mcp_servers.opencomms] section to ~/.codex/config.toml.`,
      'Codex runs a project hook only after you review it: open /hooks in Codex and trust the three OpenComms hooks (or start Codex with --dangerously-bypass-hook-trust).',
      pin ? `The MCP server is pinned to member ${pin}.` : 'Next: `opencomms install-member --host codex` gives this project\'s Codex session its member id.',
    ],
  };
}

export function planCodexUninstall(project: string, files: Map<string, string | null>, others: { serverUsed: boolean; runnerUsed: boolean }): InstallPlan | Refusal {
  const p = codexPaths(project);
  const changes: FileChange[] = [];
  const tomlText = files.get(p.config) ?? null;
  if (tomlText !== null) {
    const toml = parseToml(tomlText);
    if (!toml) return malformed(p.config, 'is not valid TOML');
    const out = removeServer(tomlText, toml.ast);
    if (out !== tomlText) changes.push({ path: p.config, content: out.trim() === '' ? null : out });
  }
  const hooksText = files.get(p.hooks) ?? null;
  if (hooksText !== null) {
    const hooks = parseObject(hooksText);
    if (!hooks) return malformed(p.hooks, 'is not a valid JSON object');
    const out = unregisterHooks(hooksText, hooks);
    const left = parseObject(out);
    if (out !== hooksText) changes.push({ path: p.hooks, content: left && Object.keys(left).length === 0 ? null : out });
  }
  if (!others.runnerUsed) changes.push(...removeBundles(project, RUNNER_BUNDLES, files));
  if (!others.serverUsed) changes.push(...removeBundles(project, [MCP_BUNDLE], files));
  return { changes, notes: [] };
}

/** Does the Codex config still use the server bundle / the hook runner? */
export function codexUses(files: Map<string, string | null>, project: string) {
  const p = codexPaths(project);
  const toml = parseToml(files.get(p.config) ?? '');
  return {
    server: toml !== null && hasServer(toml.value) && JSON.stringify(toml.value.mcp_servers).includes(MCP_BUNDLE),
    runner: registersRunner(parseObject(files.get(p.hooks) ?? '')),
  };
}
