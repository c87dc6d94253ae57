// `opencomms install opencode` (FEATURES.md §6.7): writes the self-contained plugin bundle and
// registers it in opencode.json(c). Every config is parsed before the first write: a malformed
// one means zero writes, bundle included. JSONC comments survive (jsonc-parser edits in place).
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { applyEdits, modify, parse, type ParseError } from 'jsonc-parser';
import { ok, refuse, type Refusal, type ToolResult } from '../../src/protocol/result.ts';
import { writeAtomic } from '../../src/store/index.ts';
import { bundle } from '../install/bundles.ts';
import { applyChanges, readTargets, type FileChange } from '../install/files.ts';
import { parseObject, remove, replace } from '../install/json.ts';
import { malformed } from '../install/plan.ts';

export const PLUGIN_PATH = '.opencode/plugins/opencomms.js';
/** First line of every bundle we write: how an existing file is recognised as ours. */
export const BUNDLE_MARK = '// opencomms-plugin-bundle';

/** The plugin and everything it imports in one ESM file with no bare imports (node: built-ins
 *  only). */
export const bundlePlugin = (): Promise<string> => bundle({ entry: 'adapters/opencode/plugin.ts', mark: BUNDLE_MARK });

/** opencode.json(c) as it is and as it must be: parsed before any write (a malformed config means
 *  zero writes), the plugin entry added if missing, comments kept. */
export function planConfig(project: string): { path: string; original: string | null; text: string; registered: boolean } | Refusal {
  const jsonc = join(project, 'opencode.jsonc');
  const json = join(project, 'opencode.json');
  const path = existsSync(jsonc) ? jsonc : json;
  const original = existsSync(path) ? readFileSync(path, 'utf8') : null;
  let text = original ?? '{\n  "$schema": "https://opencode.ai/config.json"\n}\n';
  const errors: ParseError[] = [];
  const cfg = parse(text, errors, { allowTrailingComma: true }) as Record<string, unknown> | undefined;
  if (errors.length || typeof cfg !== 'object' || cfg === null || Array.isArray(cfg))
    return refuse('config_malformed', `${path} is not a valid JSON(C) object; nothing was written. Fix it and retry.`);
  const plugin = cfg.plugin;
  if (plugin !== undefined && typeof plugin !== 'string' && !Array.isArray(plugin))
    return refuse('config_malformed', `"plugin" in ${path} must be a string or an array; nothing was written.`);
  const list = plugin === undefined ? [] : Array.isArray(plugin) ? plugin : [plugin];
  const registered = list.includes(PLUGIN_PATH);
  if (!registered) {
    const fmt = { formattingOptions: { insertSpaces: true, tabSize: 2 } };
    text = applyEdits(text, modify(text, ['plugin'], [...list, PLUGIN_PATH], fmt));
  }
  return { path, original, text, registered };
}

/** The installed bundle: absent, ours, or someone else's file under our name. */
export function bundleState(project: string): 'absent' | 'ours' | 'foreign' {
  const p = join(project, PLUGIN_PATH);
  if (!existsSync(p)) return 'absent';
  return readFileSync(p, 'utf8').startsWith(BUNDLE_MARK) ? 'ours' : 'foreign';
}

/** Writes the config entry only (doctor --fix, for an installed bundle whose entry went missing). */
export async function registerPlugin(project: string): Promise<ToolResult> {
  const plan = planConfig(project);
  if ('ok' in plan) return plan;
  if (plan.text !== plan.original) await writeAtomic(plan.path, plan.text, { tmpPrefix: '.opencode-config' });
  return ok(`Registered ${PLUGIN_PATH} in ${plan.path.slice(project.length + 1)}.`, { config: plan.path, config_changed: plan.text !== plan.original });
}

export async function installOpenCode(project: string, warn: (l: string) => void = () => {}): Promise<ToolResult> {
  const plan = planConfig(project);
  if ('ok' in plan) return plan;
  const bundlePath = join(project, PLUGIN_PATH);
  if (bundleState(project) === 'foreign') warn(`${PLUGIN_PATH} exists and was not written by OpenComms; replacing it.`);
  const bundle = await bundlePlugin();
  await mkdir(join(project, '.opencode', 'plugins'), { recursive: true });
  await writeAtomic(bundlePath, bundle, { tmpPrefix: '.opencomms-plugin' });
  const changed = plan.text !== plan.original;
  if (changed) await writeAtomic(plan.path, plan.text, { tmpPrefix: '.opencode-config' });
  return ok(`Installed the OpenComms plugin: ${PLUGIN_PATH} (${Math.round(bundle.length / 1024)} KB), registered in ${plan.path.slice(project.length + 1)}.`, {
    plugin: bundlePath,
    config: plan.path,
    config_changed: changed,
  });
}

/** `opencomms uninstall opencode` (FEATURES.md §9): the `plugin` entry and our bundle go; the rest stays. */
export async function uninstallOpenCode(project: string): Promise<ToolResult> {
  const jsonc = join(project, 'opencode.jsonc');
  const configPath = existsSync(jsonc) ? jsonc : join(project, 'opencode.json');
  const bundlePath = join(project, PLUGIN_PATH);
  const before = await readTargets([configPath, bundlePath]);
  const text = before.get(configPath) ?? null;
  const changes: FileChange[] = [];
  if (text !== null) {
    const cfg = parseObject(text);
    if (!cfg) return malformed(configPath, 'is not a valid JSON(C) object');
    const plugin = cfg.plugin;
    if (plugin === PLUGIN_PATH) changes.push({ path: configPath, content: remove(text, ['plugin']) });
    else if (Array.isArray(plugin) && plugin.includes(PLUGIN_PATH)) {
      const rest = plugin.filter((p) => p !== PLUGIN_PATH);
      changes.push({ path: configPath, content: rest.length ? replace(text, ['plugin'], rest) : remove(text, ['plugin']) });
    }
  }
  if (before.get(bundlePath)?.startsWith(BUNDLE_MARK)) changes.push({ path: bundlePath, content: null });
  const changed = await applyChanges(changes, before);
  return ok(`Removed OpenComms from opencode: ${changed.map((p) => p.slice(project.length + 1)).join(', ') || 'nothing was installed'}. State, pins and archives are kept.`, { changed });
}
