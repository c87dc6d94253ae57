// The operator as the engine sees it (protocol.md "Words", "Timer, kick, saved channels"): the person at the CLI or the console,
// bound by no roster. Its project id is a sentinel, so the first agent joining a session it created
// sets the session's identity; the worktree is the project directory.
import type { OperatorCaller } from '../engine/index.ts';
import { normaliseWorktree } from './worktree.ts';

export const CLI_PROJECT_ID = 'cli-local-project';
export const GUI_PROJECT_ID = 'gui-local-project';

export const operatorActor = (
  project: string,
  projectId: typeof CLI_PROJECT_ID | typeof GUI_PROJECT_ID,
): OperatorCaller => ({
  operator: true,
  project_id: projectId,
  worktree: normaliseWorktree(project),
});
