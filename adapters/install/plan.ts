// What every installer planner returns: the whole-file changes and notes for the user, or a refusal.
import { refuse, type Refusal } from '../../src/protocol/result.ts';
import type { FileChange } from './files.ts';
import { isObject } from './json.ts';
import type { RecordDelta } from './record.ts';

export interface InstallPlan {
  changes: FileChange[];
  notes: string[];
  /** What the install record gains (containers this install created) or loses (an uninstall). */
  record?: RecordDelta;
  /** Entries of ours a reinstall put right (a moved or copied project, an older install's form). */
  repaired?: string[];
}

export const isRefusal = (v: unknown): v is Refusal => isObject(v) && v.ok === false;

/** What an install says about a server entry of our name that it did not write and leaves alone. */
export const foreignNote = (what: string) =>
  `${what} that OpenComms did not write: it is left as it is, so OpenComms' own server is not configured. Rename or remove it, then install again.`;

export const malformed = (file: string, why: string): Refusal =>
  refuse('config_malformed', `${file} ${why}; nothing was written. Fix it and run the command again.`);
