// `opencomms install opencode` (FEATURES.md §6.7): writes the self-contained plugin bundle and
// registers it in opencode.json(c). Every config is parsed before the first write: a malformed
// one means zero writes, bundle included. JSONC comments survive (jsonc-parser edits in place).
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { applyEdits, modify, parse, type ParseError } from 'jsonc-parser';
import { ok, refuse, type Refusal, type ToolResult } from '../../src/protocol/result.ts';
import { writeAtomic } from '../../src/store/index.ts';
import { PACKAGE_ROOT } from '../../src/version.ts';

export const PLUGIN_PATH = '.opencode/plugins/opencomms.js';
/** First line of every bundle we write: how an existing file is recognised as ours. */
export const BUNDLE_MARK = '// opencomms-plugin-bundle';

/** The plugin and everything it imports in one ESM file with no bare imports (node: built-ins
 *  only). CommonJS dependencies get a real `require` through createRequire. */
export async function bundlePlugin(): Promise<string> {
  // Loaded when a bundle is built (install), not on every `opencomms` start.
  const { build } = await import('esbuild');
  const out = await build({
    entryPoints: [join(PACKAGE_ROOT, 'adapters', 'opencode', 'plugin.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    legalComments: 'none',
    banner: { js: `${BUNDLE_MARK}\nimport { createRequire as __ocCreateRequire } from 'node:module';\nconst require = __ocCreateRequire(import.meta.url);` },
  });
  return out.outputFiles[0]!.text;
}

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
