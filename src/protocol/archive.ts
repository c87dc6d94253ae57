// A saved channel's archive, `archives/<channel_id>.json` (protocol.md "Archives").
import * as z from 'zod';
import { ARCHIVE_ID_RE, CHANNEL_NAME_RE } from './ids.ts';
import { MAX_ARCHIVE_MESSAGES, MAX_CHANNEL_NAME, MAX_SUMMARY_CHARS } from './limits.ts';
import { EnvelopeSchema, MemberSchema } from './schema.ts';

export const ArchiveSchema = z.looseObject({
  schema: z.literal(1),
  channel_id: z.string().regex(ARCHIVE_ID_RE),
  /** A channel name: it is shown to agents and matched by name, so a tampered one is refused. */
  name: z.string().max(MAX_CHANNEL_NAME).regex(CHANNEL_NAME_RE),
  parent_channel_id: z.string().nullable().default(null),
  description: z.string().nullable().default(null),
  summary: z.string().max(MAX_SUMMARY_CHARS),
  members: z.array(MemberSchema),
  budgets: z
    .looseObject({
      max_runtime_ms: z.number().nullable().default(null),
      max_delivered_messages: z.number().nullable().default(null),
    })
    .default({ max_runtime_ms: null, max_delivered_messages: null }),
  created_at: z.number(),
  saved_at: z.number(),
  saved_by: z.string().nullable(),
  saved_by_role: z.string().nullable(),
  message_count: z.number().int().nonnegative(),
  messages: z.array(EnvelopeSchema).max(MAX_ARCHIVE_MESSAGES),
  final_state_note: z.string(),
});
export type Archive = z.infer<typeof ArchiveSchema>;
export type ArchiveInput = z.input<typeof ArchiveSchema>;

/** The newest of `newestFirst` whose name matches `name` case-insensitively: what a saved
 *  session's name resolves to when several archives share it. */
export function archiveNamed<A extends { name: string }>(newestFirst: readonly A[], name: string): A | undefined {
  const wanted = name.trim().toLowerCase();
  return newestFirst.find((a) => a.name.toLowerCase() === wanted);
}

/** An archive without its messages: what lists, lookups by name and channel cards read. */
export const ArchiveHeadSchema = ArchiveSchema.omit({ messages: true });
export type ArchiveHead = z.infer<typeof ArchiveHeadSchema>;
