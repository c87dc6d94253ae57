// What installs created, so an uninstall removes exactly that: `.opencomms/install-record.json`.
// An install that adds an entry to a container it had to create (a file, `mcpServers`, `hooks`, a
// hook event, OpenCode's `plugin`) records the container; uninstall removes a container left empty
// only when the record names it, so a `{}` or `{"mcpServers": {}}` the user wrote stays. A value the
// install had to reshape (a `"plugin": "x"` string made an array) records its old shape. Without a
// record (another clone, an older install) uninstall removes only its own entries and keeps every
// container and file.
import { join } from 'node:path';
import type { FileChange } from './files.ts';
import { isObject } from './json.ts';

export const RECORD_FILE = 'install-record.json';
export const recordPath = (project: string) => join(project, '.opencomms', RECORD_FILE);

export interface InstallRecord {
  /** host label → `<relative file>` or `<relative file>#<key>/<key>` keys of what its install created. */
  created: Record<string, string[]>;
  /** `<relative file>#<key>` → the JSON value that stood there before an install reshaped it. */
  reshaped: Record<string, unknown>;
}

export const emptyRecord = (): InstallRecord => ({ created: {}, reshaped: {} });

/** The record in this text; an unreadable one counts as none (uninstall then keeps containers). */
export function parseRecord(text: string | null): InstallRecord {
  if (text === null) return emptyRecord();
  try {
    const v: unknown = JSON.parse(text);
    if (!isObject(v) || !isObject(v.created)) return emptyRecord();
    const created: Record<string, string[]> = {};
    for (const [host, keys] of Object.entries(v.created))
      if (Array.isArray(keys)) created[host] = keys.filter((k): k is string => typeof k === 'string');
    return { created, reshaped: isObject(v.reshaped) ? v.reshaped : {} };
  } catch {
    return emptyRecord();
  }
}

/** The key of a created container: the file, or a JSON path inside it. */
export const containerKey = (file: string, path: readonly (string | number)[] = []) =>
  path.length ? `${file}#${path.join('/')}` : file;

/** What one host's plan adds to or drops from the record. */
export interface RecordDelta {
  created?: string[];
  reshaped?: Record<string, unknown>;
  /** Uninstall: forget everything of this host. */
  forget?: boolean;
}

/** The record file's change for `delta` of `host` (null when nothing changes; the file goes when empty). */
export function recordChange(
  project: string,
  text: string | null,
  host: string,
  delta: RecordDelta,
): FileChange | null {
  const rec = parseRecord(text);
  if (delta.forget) {
    const mine = new Set(rec.created[host] ?? []);
    delete rec.created[host];
    for (const k of Object.keys(rec.reshaped)) if (mine.has(`reshaped:${k}`)) delete rec.reshaped[k];
  } else {
    const keys = new Set(rec.created[host] ?? []);
    for (const k of delta.created ?? []) keys.add(k);
    for (const [k, v] of Object.entries(delta.reshaped ?? {})) {
      if (!(k in rec.reshaped)) rec.reshaped[k] = v;
      keys.add(`reshaped:${k}`);
    }
    if (keys.size) rec.created[host] = [...keys].sort();
  }
  const empty = Object.keys(rec.created).length === 0 && Object.keys(rec.reshaped).length === 0;
  const out = empty ? null : `${JSON.stringify(rec, null, 2)}\n`;
  return out === text ? null : { path: recordPath(project), content: out };
}

/** Did `host`'s install create this container, or the file or container holding it? */
export function created(rec: InstallRecord, host: string, key: string): boolean {
  const mine = rec.created[host] ?? [];
  const [file, path] = key.split('#') as [string, string | undefined];
  const parts = path ? path.split('/') : [];
  for (let n = 0; n <= parts.length; n++) if (mine.includes(containerKey(file, parts.slice(0, n)))) return true;
  return false;
}
