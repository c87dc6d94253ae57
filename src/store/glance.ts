// A look at a project's mail without opening its store, for hot paths that only decide "nothing to
// do here" (the hook runner runs on every prompt): the files' glance (file/glance.ts) or, for a
// project bound to PostgreSQL, its mailbox rows (postgres/glance.ts). Anything either cannot read
// plainly is `unknown`, and the caller takes the full path: a glance must never miss mail.
import { existsSync } from 'node:fs';
import { glance } from './file/glance.ts';
import { resolvePaths } from './paths.ts';
import { pgGlance } from './postgres/glance.ts';
import type { Glance } from './types.ts';

/** The glance at any project: its mailbox rows when it is bound to PostgreSQL, else its files. */
export function glanceProject(projectDir: string, env: NodeJS.ProcessEnv): Promise<Glance> | Glance {
  const binding = resolvePaths(projectDir).binding;
  return existsSync(binding) ? pgGlance(binding, env) : glance(projectDir);
}
