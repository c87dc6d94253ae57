// What the spec says the MCP surface looks like (FEATURES.md §3, §7), as tables the MCP tests
// check the real server against.
import { REASONS, type Reason } from '../../src/protocol/result.ts';

/** FEATURES.md §7.3 "MCP required arguments". */
export const REQUIRED: Record<string, string[]> = {
  opencomms_create: ['channel', 'role', 'role_prompt'],
  opencomms_join: ['channel', 'role', 'role_prompt'],
  opencomms_send: ['channel', 'content'],
  opencomms_status: [],
  opencomms_inbox: ['channel'],
  opencomms_pull: [],
  opencomms_history: ['channel'],
  opencomms_update_role: ['channel', 'role_prompt'],
  opencomms_pause: ['channel'],
  opencomms_resume: ['channel'],
  opencomms_disconnect: ['channel'],
  opencomms_kick: ['channel'],
  opencomms_timer: ['channel', 'action'],
  opencomms_save_session: ['channel'],
  opencomms_resume_session: ['channel'],
  opencomms_delete_session: ['channel', 'confirm'],
  opencomms_archive: [],
};
export const ALL_TOOLS = Object.keys(REQUIRED).sort();
/** Without --admin the kick tool is not listed (§7.1). */
export const NON_ADMIN_TOOLS = ALL_TOOLS.filter((t) => t !== 'opencomms_kick');
/** Tools that need the pin on a live roster (§7.2: every tool except the bootstrap ones). */
export const ROSTER_GATED = [
  'opencomms_send',
  'opencomms_status',
  'opencomms_inbox',
  'opencomms_pull',
  'opencomms_history',
  'opencomms_update_role',
  'opencomms_pause',
  'opencomms_resume',
  'opencomms_disconnect',
  'opencomms_timer',
  'opencomms_save_session',
];
/** Argument names that would carry an identity; no tool may accept one (§7.2). */
export const IDENTITY_ARGS = ['session_id', 'sender_session_id', 'member_id', 'pin', 'OPENCOMMS_MEMBER_ID'];
/** Every identity-like argument, naming `pin`: what a caller trying to act as `pin` would add. */
export const posingAs = (pin: string): Record<string, string> => Object.fromEntries(IDENTITY_ARGS.map((k) => [k, pin]));

/** Valid arguments for every tool, naming `channel`. */
export const sampleArgs = (channel: string): Record<string, Record<string, unknown>> => ({
  opencomms_create: { channel: `${channel}-new`, role: 'Ghost', role_prompt: 'p' },
  opencomms_join: { channel, role: 'Ghost', role_prompt: 'p' },
  opencomms_send: { channel, content: 'from nobody' },
  opencomms_status: {},
  opencomms_inbox: { channel },
  opencomms_pull: {},
  opencomms_history: { channel },
  opencomms_update_role: { channel, role_prompt: 'taken over' },
  opencomms_pause: { channel },
  opencomms_resume: { channel },
  opencomms_disconnect: { channel },
  opencomms_kick: { channel, target_role: 'Beta' },
  opencomms_timer: { channel, action: 'start' },
  opencomms_save_session: { channel },
  opencomms_resume_session: { channel },
  opencomms_delete_session: { channel, confirm: true },
  opencomms_archive: {},
});

/** Reasons the MCP surface can never return, each with the place the spec says so. Every other
 *  reason of `REASONS` must be reachable through a real MCP server (test/adapters/mcp/reasons.test.ts). */
export const NOT_THROUGH_MCP = {
  not_linked: 'OpenCode adapter pre-check (FEATURES.md §3.2 "ADP")',
  child_session: 'OpenCode adapter pre-check (FEATURES.md §3.2 "ADP", §6.5)',
  root_lookup_failed: 'OpenCode adapter pre-check (FEATURES.md §3.2 "ADP", §6.5)',
  context_missing:
    'an adapter fault (§3.4); the MCP adapter always supplies the session (the pin, else identity_unpinned), the project id and the worktree (§7.2)',
  admin_required:
    'unreachable while opencomms_kick is unlisted without --admin (FEATURES.md §3.4); an unlisted tool is -32602',
  pins_exist: 'CLI/console only: install-member (FEATURES.md §3.4, §8.3)',
  project_not_found: 'CLI only: `--project` naming a missing directory (an MCP server is started on its project)',
  project_not_directory: 'CLI only: `--project` naming a file',
  usage_error: 'CLI only: a command line commander cannot parse, under --json',
  invalid_member_id: 'CLI/console only: install-member (FEATURES.md §3.4, §8.3)',
  pin_conflict: 'CLI/console only: install-member (FEATURES.md §3.4, §8.3)',
  host_not_installable: 'CLI/console only: install (FEATURES.md §3.4, §9)',
  host_not_found: 'CLI only: `opencomms codex` with no Codex binary to run',
  config_malformed: 'CLI/console only: install (FEATURES.md §3.4, §6.7, §8.1)',
  hold_lost:
    'a delivery commit or requeue of the runtime (not a tool): the answer to a process that lost its hold on a batch',
} as const satisfies Partial<Record<Reason, string>>;

export type McpReason = Exclude<Reason, keyof typeof NOT_THROUGH_MCP>;
export const MCP_REASONS = REASONS.filter((r): r is McpReason => !(r in NOT_THROUGH_MCP));
