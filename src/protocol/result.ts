// ToolResult: the one answer shape of every operation (protocol.md "Result shape"). Errors are data.

export const REASONS = [
  'channel_not_found',
  'not_member',
  'not_linked',
  'lifecycle_refused',
  'channel_paused',
  'budget_exhausted',
  'content_empty',
  'content_too_large',
  'invalid_message_type',
  'invalid_argument',
  'no_recipient',
  'recipient_not_found',
  'recipient_ambiguous',
  'recipient_stale',
  'rate_limited',
  'duplicate_content',
  'hop_limit_exceeded',
  'channel_exists',
  'channel_full',
  'role_taken',
  'already_member',
  'invalid_channel_name',
  'invalid_role',
  'role_prompt_required',
  'project_mismatch',
  'worktree_mismatch',
  'child_session',
  'root_lookup_failed',
  'context_missing',
  'not_coordinator',
  'target_required',
  'cannot_kick_self',
  'target_not_found',
  'invalid_timer_action',
  'invalid_limit',
  'summary_too_large',
  'archive_not_found',
  'not_archived_member',
  'resume_ladder_exhausted',
  'confirm_required',
  'identity_unpinned',
  'identity_not_member',
  'pull_not_allowed',
  'state_busy',
  'state_incompatible',
  'state_unreadable',
  'internal_error',
  'admin_required',
  'pins_exist',
  'invalid_member_id',
  'pin_conflict',
  'host_not_installable',
  'host_not_found',
  'config_malformed',
  'store_unwritable',
  'state_too_large',
  'project_not_found',
  'project_not_directory',
  'usage_error',
  'hold_lost',
] as const;
export type Reason = (typeof REASONS)[number];

export interface ToolResult<D extends object = Record<string, unknown>> {
  ok: boolean;
  message: string;
  data?: D;
}

export type Refusal = ToolResult<{ reason: Reason } & Record<string, unknown>> & { ok: false };

export const ok = <D extends object>(message: string, data?: D): ToolResult<D> =>
  data === undefined ? { ok: true, message } : { ok: true, message, data };

export const refuse = (reason: Reason, message: string, extra: Record<string, unknown> = {}): Refusal => ({
  ok: false,
  message,
  data: { reason, ...extra },
});

/** A refusal raised deep inside the store or runtime (lock timeout, incompatible file) that must
 *  surface as a ToolResult, not a stack trace. */
export class RefusalError extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.message);
  }
}
