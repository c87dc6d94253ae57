// `opencomms install opencode` (hosts.md "OpenCode"): writes the self-contained plugin bundle and
// registers it in opencode.json(c). Every config is parsed before the first write: a malformed
// one means zero writes, bundle included. The entry is one element added to the user's `plugin`
// array (its comments, trailing comma and layout stay); a `"plugin": "x"` string becomes an array
// and the install record keeps the string, so uninstall gives it back.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse, type ParseError } from 'jsonc-parser';
import { ok, refuse, type Refusal, type ToolResult } from '../../src/protocol/result.ts';
import { ensureDir, resolvePaths } from '../../src/store/index.ts';
import { bundle } from '../install/bundles.ts';
import { applyChanges, readTargets, type FileChange } from '../install/files.ts';
import { append, parseObject, remove, replace } from '../install/json.ts';
import { malformed } from '../install/plan.ts';
import { containerKey, created, parseRecord, recordChange, recordPath, type RecordDelta } from '../install/record.ts';

const HOST = 'opencode';

export const PLUGIN_PATH = '.opencode/plugins/opencomms.js';
/** First line of every bundle we write: how an existing file is recognised as ours. */
export const BUNDLE_MARK = '// opencomms-plugin-bundle';

/** The plugin and everything it imports in one ESM file with no bare imports (node: built-ins
 *  only). */
export const bundlePlugin = (): Promise<string> => bundle({ entry: 'adapters/opencode/plugin.ts', mark: BUNDLE_MARK });

const NEW_CONFIG = '{\n  "$schema": "https://opencode.ai/config.json"\n}\n';

export interface ConfigPlan {
  path: string;
  original: string | null;
  text: string;
  registered: boolean;
  record: RecordDelta;
}

/** opencode.json(c) as it is and as it must be: parsed before any write (a malformed config means
 *  zero writes), the plugin entry added if missing, everything else kept. */
export function planConfig(project: string): ConfigPlan | Refusal {
  const jsonc = join(project, 'opencode.jsonc');
  const json = join(project, 'opencode.json');
  const path = existsSync(jsonc) ? jsonc : json;
  const rel = basename(path);
  const original = existsSync(path) ? readFileSync(path, 'utf8') : null;
  let text = original ?? NEW_CONFIG;
  const errors: ParseError[] = [];
  const cfg = parse(text, errors, { allowTrailingComma: true }) as Record<string, unknown> | undefined;
  if (errors.length || typeof cfg !== 'object' || cfg === null || Array.isArray(cfg))
    return refuse('config_malformed', `${path} is not a valid JSON(C) object; nothing was written. Fix it and retry.`);
  const plugin = cfg.plugin;
  if (plugin !== undefined && typeof plugin !== 'string' && !Array.isArray(plugin))
    return refuse('config_malformed', `"plugin" in ${path} must be a string or an array; nothing was written.`);
  const registered = plugin === PLUGIN_PATH || (Array.isArray(plugin) && plugin.includes(PLUGIN_PATH));
  const record: RecordDelta = { created: original === null ? [rel] : [] };
  if (!registered) {
    if (plugin === undefined) {
      text = append(text, [], [PLUGIN_PATH], 'plugin');
      record.created!.push(containerKey(rel, ['plugin']));
    } else if (typeof plugin === 'string') {
      text = replace(text, ['plugin'], [plugin, PLUGIN_PATH]);
      record.reshaped = { [containerKey(rel, ['plugin'])]: plugin };
    } else text = append(text, ['plugin'], PLUGIN_PATH);
  }
  return { path, original, text, registered, record };
}

/** The installed bundle: absent, ours, or someone else's file under our name. */
export function bundleState(project: string): 'absent' | 'ours' | 'foreign' {
  const p = join(project, PLUGIN_PATH);
  if (!existsSync(p)) return 'absent';
  return readFileSync(p, 'utf8').startsWith(BUNDLE_MARK) ? 'ours' : 'foreign';
}

/** Applies config and bundle changes with the record's, the one write step of every installer. */
async function applyWithRecord(project: string, changes: FileChange[], delta: RecordDelta): Promise<string[]> {
  const rp = recordPath(project);
  const before = await readTargets([...changes.map((c) => c.path), rp]);
  const rec = recordChange(project, before.get(rp) ?? null, HOST, delta);
  const all = rec ? [...changes, rec] : changes;
  if (all.some((c) => c.content !== null && c.path === rp)) await ensureDir(resolvePaths(project));
  return (await applyChanges(all, before)).filter((p) => p !== rp);
}

/** Writes the config entry only (doctor --fix, for an installed bundle whose entry went missing). */
export async function registerPlugin(project: string): Promise<ToolResult> {
  const plan = planConfig(project);
  if ('ok' in plan) return plan;
  await applyWithRecord(project, [{ path: plan.path, content: plan.text }], plan.record);
  return ok(`Registered ${PLUGIN_PATH} in ${plan.path.slice(project.length + 1)}.`, {
    config: plan.path,
    config_changed: plan.text !== plan.original,
  });
}

export async function installOpenCode(project: string, warn: (l: string) => void = () => {}): Promise<ToolResult> {
  const plan = planConfig(project);
  if ('ok' in plan) return plan;
  const bundlePath = join(project, PLUGIN_PATH);
  if (bundleState(project) === 'foreign') warn(`${PLUGIN_PATH} exists and was not written by OpenComms; replacing it.`);
  const bundle = await bundlePlugin();
  await applyWithRecord(
    project,
    [
      { path: bundlePath, content: bundle },
      { path: plan.path, content: plan.text },
    ],
    plan.record,
  );
  const changed = plan.text !== plan.original;
  return ok(
    `Installed the OpenComms plugin: ${PLUGIN_PATH} (${Math.round(bundle.length / 1024)} KB), registered in ${plan.path.slice(project.length + 1)}.`,
    {
      plugin: bundlePath,
      config: plan.path,
      config_changed: changed,
    },
  );
}

/** The config without our entry: one array element removed, a reshaped string given back, a
 *  `plugin` key or a whole file removed only when an install created it. */
function unregister(
  text: string,
  cfg: Record<string, unknown>,
  rel: string,
  rec: ReturnType<typeof parseRecord>,
): string | null {
  const plugin = cfg.plugin;
  const key = containerKey(rel, ['plugin']);
  let out = text;
  if (plugin === PLUGIN_PATH) out = remove(text, ['plugin']);
  else if (Array.isArray(plugin) && plugin.includes(PLUGIN_PATH)) {
    const rest = plugin.filter((p) => p !== PLUGIN_PATH);
    const was = rec.reshaped[key];
    if (typeof was === 'string' && rest.length === 1 && rest[0] === was) out = replace(text, ['plugin'], was);
    else if (rest.length === 0 && created(rec, HOST, key)) out = remove(text, ['plugin']);
    else out = remove(text, ['plugin', plugin.indexOf(PLUGIN_PATH)]);
  }
  return out === NEW_CONFIG && created(rec, HOST, rel) ? null : out;
}

/** `opencomms uninstall opencode` (operator.md "Command line"): the `plugin` entry and our bundle go; the rest stays. */
export async function uninstallOpenCode(project: string): Promise<ToolResult> {
  const jsonc = join(project, 'opencode.jsonc');
  const configPath = existsSync(jsonc) ? jsonc : join(project, 'opencode.json');
  const bundlePath = join(project, PLUGIN_PATH);
  const before = await readTargets([configPath, bundlePath, recordPath(project)]);
  const text = before.get(configPath) ?? null;
  const changes: FileChange[] = [];
  if (text !== null) {
    const cfg = parseObject(text);
    if (!cfg) return malformed(configPath, 'is not a valid JSON(C) object');
    const out = unregister(text, cfg, basename(configPath), parseRecord(before.get(recordPath(project)) ?? null));
    if (out !== text) changes.push({ path: configPath, content: out });
  }
  if (before.get(bundlePath)?.startsWith(BUNDLE_MARK)) changes.push({ path: bundlePath, content: null });
  const changed = await applyWithRecord(project, changes, { forget: true });
  return ok(
    `Removed OpenComms from opencode: ${changed.map((p) => p.slice(project.length + 1)).join(', ') || 'nothing was installed'}. State, pins and archives are kept.`,
    { changed },
  );
}
