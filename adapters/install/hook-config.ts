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
    for (const g of groups)
      if (!isObject(g) || (g.hooks !== undefined && !Array.isArray(g.hooks)))
        return `"hooks.${event}" holds an entry that is not {hooks: [...]}`;
  }
  return null;
}

/** A registration's new text, the containers it created (for the install record) and the events
 *  whose entries of ours it repaired. */
export interface HookEdit {
  text: string;
  created: string[][];
  repaired: string[];
}

/**
 * Registers `groups` (one per event). An event that already holds exactly our handlers is left
 * alone (a second run changes no byte); handlers of ours that differ are replaced inside their
 * group, so a handler the user added to that group stays; otherwise our group is appended after
 * the user's own groups.
 */
export function registerHooks(text: string, cfg: JsonObject, groups: Record<string, HookGroup>): HookEdit {
  if (!isObject(cfg.hooks)) {
    const out = append(text, [], Object.fromEntries(Object.entries(groups).map(([e, g]) => [e, [g]])), 'hooks');
    return { text: out, created: [['hooks'], ...Object.keys(groups).map((e) => ['hooks', e])], repaired: [] };
  }
  const hooks = cfg.hooks;
  const edit: HookEdit = { text, created: [], repaired: [] };
  for (const [event, group] of Object.entries(groups)) {
    const list = hooks[event];
    if (!Array.isArray(list)) {
      edit.text = append(edit.text, ['hooks'], [group], event);
      edit.created.push(['hooks', event]);
      continue;
    }
    const mine = list.findIndex(ours);
    if (mine < 0) edit.text = append(edit.text, ['hooks', event], group);
    else if (repairGroup(edit, event, mine, list[mine], group)) edit.repaired.push(event);
  }
  return edit;
}

/** Puts our handlers of one existing group right; true when anything changed. */
function repairGroup(edit: HookEdit, event: string, gi: number, existing: unknown, group: HookGroup): boolean {
  const handlers = isObject(existing) && Array.isArray(existing.hooks) ? existing.hooks : [];
  const mine = handlers.filter(ours);
  if (JSON.stringify(mine) === JSON.stringify(group.hooks)) return false;
  if (mine.length === handlers.length) {
    edit.text = replace(edit.text, ['hooks', event, gi], group);
    return true;
  }
  for (let hi = handlers.length - 1; hi >= 0; hi--)
    if (ours(handlers[hi])) edit.text = remove(edit.text, ['hooks', event, gi, 'hooks', hi]);
  for (const h of group.hooks) edit.text = append(edit.text, ['hooks', event, gi, 'hooks'], h);
  return true;
}

/** Removes every handler of ours and every group left empty by that; an event or a `hooks` object
 *  left empty goes only when `mayRemove` says an install created it. */
export function unregisterHooks(
  text: string,
  cfg: JsonObject,
  mayRemove: (path: string[]) => boolean = () => false,
): string {
  const hooks = cfg.hooks;
  if (!isObject(hooks)) return text;
  let events = Object.keys(hooks).length;
  for (const [event, raw] of Object.entries(hooks)) {
    if (!Array.isArray(raw) || !raw.some(ours)) continue;
    let left = raw.length;
    for (let gi = raw.length - 1; gi >= 0; gi--) {
      const handlers =
        isObject(raw[gi]) && Array.isArray((raw[gi] as JsonObject).hooks)
          ? ((raw[gi] as JsonObject).hooks as unknown[])
          : [];
      const mine = handlers.filter(ours).length;
      if (!mine) continue;
      if (mine === handlers.length) {
        text = remove(text, ['hooks', event, gi]);
        left--;
      } else
        for (let hi = handlers.length - 1; hi >= 0; hi--)
          if (ours(handlers[hi])) text = remove(text, ['hooks', event, gi, 'hooks', hi]);
    }
    if (left === 0 && mayRemove(['hooks', event])) {
      text = remove(text, ['hooks', event]);
      events--;
    }
  }
  return events === 0 && mayRemove(['hooks']) ? remove(text, ['hooks']) : text;
}

/** Does this config still register the hook runner? */
export const registersRunner = (cfg: JsonObject | null) => cfg !== null && ours(cfg.hooks);
