// What every installer planner returns: the whole-file changes and notes for the user, or a refusal.
import { refuse, type Refusal } from '../../src/protocol/result.ts';
import type { FileChange } from './files.ts';
import { isObject } from './json.ts';

export interface InstallPlan {
  changes: FileChange[];
  notes: string[];
}

export const isRefusal = (v: unknown): v is Refusal => isObject(v) && v.ok === false;

export const malformed = (file: string, why: string): Refusal =>
  refuse('config_malformed', `${file} ${why}; nothing was written. Fix it and run the command again.`);
