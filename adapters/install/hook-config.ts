// Hook registrations in the shape Claude Code (`.claude/settings.json`) and Codex
// (`.codex/hooks.json`) share: `{hooks: {<Event>: [{matcher?, hooks: [<handler>…]}]}}`.
// OpenComms owns every handler whose command names the hook runner; nothing else is touched.
import { HOOK_RUNNER } from './bundles.ts';
import { append, isObject, remove, replace, type JsonObject } from './json.ts';

export interface HookHandler {
  type: 'command';
  command: string;
  timeout: number;
  [option: string]: unknown;
}
export interface HookGroup {
  hooks: HookHandler[];
}

const ours = (v: unknown) => JSON.stringify(v ?? null).includes(HOOK_RUNNER);

/** Why the `hooks` value cannot be edited safely, or null when it can. */
export function hooksShapeError(cfg: JsonObject): string | null {
  const hooks = cfg.hooks;
  if (hooks === undefined) return null;
  if (!isObject(hooks)) return '"hooks" must be an object';
  for (const [event, groups] of Object.entries(hooks)) {
    if (!Array.isArray(groups)) return `"hooks.${event}" must be an array`;
    for (const g of groups) if (!isObject(g) || (g.hooks !== undefined && !Array.isArray(g.hooks))) return `"hooks.${event}" holds an entry that is not {hooks: [...]}`;
  }
  return null;
}

/**
 * Registers `groups` (one per event). An event that already holds exactly our group is left alone
 * (a second run changes no byte); an older group of ours is replaced in place; otherwise ours is
 * appended after the user's own groups.
 */
export function registerHooks(text: string, cfg: JsonObject, groups: Record<string, HookGroup>): string {
  if (!isObject(cfg.hooks)) return append(text, [], Object.fromEntries(Object.entries(groups).map(([e, g]) => [e, [g]])), 'hooks');
  const hooks = cfg.hooks;
  for (const [event, group] of Object.entries(groups)) {
    const list = hooks[event];
    if (!Array.isArray(list)) {
      text = append(text, ['hooks'], [group], event);
      continue;
    }
    const mine = list.findIndex(ours);
    if (mine < 0) text = append(text, ['hooks', event], group);
    else if (JSON.stringify(list[mine]) !== JSON.stringify(group)) text = replace(text, ['hooks', event, mine], group);
  }
  return text;
}

/** Removes every handler of ours, then groups, events and a `hooks` object left empty by that. */
export function unregisterHooks(text: string, cfg: JsonObject): string {
  const hooks = cfg.hooks;
  if (!isObject(hooks)) return text;
  let events = Object.keys(hooks).length;
  for (const [event, raw] of Object.entries(hooks)) {
    if (!Array.isArray(raw) || !raw.some(ours)) continue;
    let left = raw.length;
    for (let gi = raw.length - 1; gi >= 0; gi--) {
      const handlers = isObject(raw[gi]) && Array.isArray((raw[gi] as JsonObject).hooks) ? ((raw[gi] as JsonObject).hooks as unknown[]) : [];
      const mine = handlers.filter(ours).length;
      if (!mine) continue;
      if (mine === handlers.length) {
        text = remove(text, ['hooks', event, gi]);
        left--;
      } else for (let hi = handlers.length - 1; hi >= 0; hi--) if (ours(handlers[hi])) text = remove(text, ['hooks', event, gi, 'hooks', hi]);
    }
    if (left === 0) {
      text = remove(text, ['hooks', event]);
      events--;
    }
  }
  return events === 0 ? remove(text, ['hooks']) : text;
}

/** Does this config still register the hook runner? */
export const registersRunner = (cfg: JsonObject | null) => cfg !== null && ours(cfg.hooks);
