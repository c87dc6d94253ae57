// Identifier shapes. Ids are minted by the shell (randomness is I/O) and passed into the engine.
import { randomBytes } from 'node:crypto';

export const MESSAGE_ID_RE = /^ocm_[0-9a-f]{32}$/;
export const CHANNEL_ID_RE = /^chn_[0-9a-f]{32}$/;
export const CORRELATION_ID_RE = /^cor_[0-9a-f]{32}$/;
/** Member ids and pin file names: checked before any path is built from one. */
export const MEMBER_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Archive ids: checked before any path is built from one. */
export const ARCHIVE_ID_RE = /^chn_[A-Za-z0-9_-]{1,64}$/;
export const CHANNEL_NAME_RE = /^[a-z0-9][a-z0-9\-_]*$/;
export const ROLE_RE = /^[A-Za-z][A-Za-z0-9 _-]{0,31}$/;
export const HOST_LABEL_RE = /^[a-z][a-z0-9-]{0,31}$/;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

export const newMessageId = () => `ocm_${hex(16)}`;
export const newChannelId = () => `chn_${hex(16)}`;
export const newCorrelationId = () => `cor_${hex(16)}`;
export const newMemberId = () => `sess_${hex(12)}`;

export const isMemberId = (v: unknown): v is string => typeof v === 'string' && MEMBER_ID_RE.test(v);
export const isArchiveId = (v: unknown): v is string => typeof v === 'string' && ARCHIVE_ID_RE.test(v);
