// What one hook run is about (hosts.md "The hook runner"): the mode from argv, the project directory, the host
// label, and the JSON the host wrote on stdin. Node built-ins only: this runs on every prompt.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

export type HookEvent = 'SessionStart' | 'UserPromptSubmit' | 'Stop' | 'SessionEnd';
const EVENTS: readonly HookEvent[] = ['SessionStart', 'UserPromptSubmit', 'Stop', 'SessionEnd'];

const MODES: Record<string, HookEvent | 'auto' | 'wait' | 'confirm'> = {
  auto: 'auto',
  confirm: 'confirm',
  'session-start': 'SessionStart',
  'user-prompt-submit': 'UserPromptSubmit',
  stop: 'Stop',
  'session-end': 'SessionEnd',
  wait: 'wait',
};

/** The fields of the hosts' hook input that OpenComms reads (Claude Code; Codex sends the same names). */
export interface HookInput {
  session_id?: string;
  hook_event_name?: string;
  cwd?: string;
  source?: string;
  stop_hook_active?: boolean;
  prompt?: string;
  transcript_path?: string;
}

/** The line on which the installed waiter's shell exits 2 (install.ts WAIT_CMD, wake.ts `wake`). */
export const SHELL_WAKE_LINE = 'wake';

export interface HookContext {
  /** `wait`: the waiter that wakes an idle session; `confirm`: the commit of a woken turn's batch,
   *  detached from the hook; `event`: a boundary hook. */
  mode: 'event' | 'wait' | 'confirm';
  event: HookEvent | null;
  project: string;
  /** `claude-code`, or `codex` when Codex runs the same runner (`--host codex`). */
  host: string;
  input: HookInput;
  env: NodeJS.ProcessEnv;
  /** `wait --shell PID`: the waiter runs in the background of the installed command's shell
   *  (install.ts WAIT_CMD), which exits 2 when the waiter tells it to; null: the waiter exits 2
   *  itself (an install of an earlier version ran it bare). */
  shell: number | null;
}

export function readStdin(): string {
  try {
    return readFileSync(0, 'utf8');
  } catch {
    return '';
  }
}

/** argv: `[auto|session-start|user-prompt-submit|stop|session-end|wait] [project-dir] [--host LABEL] [--shell PID]`. */
export function hookContext(argv: string[], stdin: string, env: NodeJS.ProcessEnv, cwd = process.cwd()): HookContext {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: false,
    options: { host: { type: 'string' }, shell: { type: 'string' } },
  });
  let input: HookInput = {};
  try {
    const parsed: unknown = JSON.parse(stdin || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) input = parsed as HookInput;
  } catch {
    // no usable input: the event below resolves to null and the runner answers {}
  }
  const mode = MODES[positionals[0] ?? 'auto'] ?? 'auto';
  const named = mode === 'auto' || mode === 'wait' || mode === 'confirm' ? input.hook_event_name : mode;
  const event = EVENTS.includes(named as HookEvent) ? (named as HookEvent) : null;
  const project = positionals[1] || env.CLAUDE_PROJECT_DIR || (typeof input.cwd === 'string' && input.cwd) || cwd;
  return {
    mode: mode === 'wait' || mode === 'confirm' ? mode : 'event',
    event,
    project,
    host: typeof values.host === 'string' ? values.host : 'claude-code',
    input,
    env,
    shell: Number.isInteger(Number(values.shell)) && Number(values.shell) > 0 ? Number(values.shell) : null,
  };
}
