// A look at the state without the store: the file parsed but NOT validated, no lock, no schema
// library loaded. For hot paths that only decide "nothing to do here" (the hook runner runs on
// every prompt); anything that acts goes through the Store, which validates. Node built-ins only.
import { readFileSync } from 'node:fs';
import { resolvePaths } from './paths.ts';

/** The parsed state file, or null when it is absent or not JSON (the caller takes the full path). */
export function glance(projectDir: string): unknown {
  try {
    return JSON.parse(readFileSync(resolvePaths(projectDir).state, 'utf8'));
  } catch {
    return null;
  }
}
