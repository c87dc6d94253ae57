// Join commands (operator.md "Command line"): what an operator pastes into each host so that its session
// joins a channel, one source for `opencomms join-command` and the console.
import { ok, refuse, type ToolResult } from '../src/protocol/result.ts';

export const JOIN_HOSTS = ['opencode', 'claude-code', 'codex', 'claude-desktop', 'chatgpt'] as const;
export type JoinHost = (typeof JOIN_HOSTS)[number];
export const DEFAULT_JOIN_HOST: JoinHost = 'opencode';
/** Stands where the operator writes the role the joining agent takes. */
export const ROLE_PLACEHOLDER = '<role>';

const WHERE: Record<JoinHost, string> = {
  opencode: 'in the OpenCode session (type it)',
  'claude-code': 'in the Claude Code session (ask the agent)',
  codex: 'in the Codex session (ask the agent)',
  'claude-desktop': 'in Claude Desktop (ask the agent)',
  chatgpt: 'in ChatGPT (ask the agent)',
};

/** Spawn delivery exists only where the host CLI can continue a host session (hosts.md "spawn_push"). */
const SPAWN_HOSTS: readonly JoinHost[] = ['claude-code', 'codex'];

export interface JoinCommand {
  session: string;
  host: JoinHost;
  where: string;
  command: string;
  /** Every host a join command exists for (the console's tabs). */
  hosts: readonly JoinHost[];
}

export const isJoinHost = (h: unknown): h is JoinHost => (JOIN_HOSTS as readonly unknown[]).includes(h);

export function joinCommand(session: string, host: JoinHost, role = ROLE_PLACEHOLDER): JoinCommand {
  const command =
    host === 'opencode'
      ? `/OpenComms Join Channel=${session} As=${role} [role instructions]`
      : `opencomms_join(channel="${session}", role="${role}", role_prompt="..."${SPAWN_HOSTS.includes(host) ? ', spawn_push=true' : ''})`;
  return { session, host, where: WHERE[host], command, hosts: JOIN_HOSTS };
}

/** The checked form both surfaces answer with: an unknown host is `invalid_argument`. */
export function joinCommandResult(
  session: string,
  host: unknown = DEFAULT_JOIN_HOST,
  role?: string,
): ToolResult<JoinCommand> {
  if (!isJoinHost(host))
    return refuse('invalid_argument', `Unknown host "${String(host)}". Use one of: ${JOIN_HOSTS.join(', ')}.`, {
      field: 'host',
    }) as ToolResult<never>;
  const j = joinCommand(session, host, role);
  return ok(`Run ${j.where}:`, j);
}

export const renderJoinCommand = (j: JoinCommand) => `Run ${j.where}:\n    ${j.command}\n`;
