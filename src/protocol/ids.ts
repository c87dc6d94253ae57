// Identifier shapes. Ids are minted by the shell (randomness is I/O) and passed into the engine.
import { crypto } from '../lazy-crypto.ts';

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

/** Random bytes are drawn from a pool refilled 4 KiB at a time (as uuid does): a `randomBytes`
 *  call per id costs more than the id, and a send makes three. */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let used = POOL_BYTES;

const hex = (bytes: number) => {
  if (used + bytes > POOL_BYTES) {
    crypto().randomFillSync(pool);
    used = 0;
  }
  used += bytes;
  return pool.toString('hex', used - bytes, used);
};

export const newMessageId = () => `ocm_${hex(16)}`;
export const newChannelId = () => `chn_${hex(16)}`;
export const newCorrelationId = () => `cor_${hex(16)}`;
export const newMemberId = () => `sess_${hex(12)}`;

export const isMemberId = (v: unknown): v is string => typeof v === 'string' && MEMBER_ID_RE.test(v);
export const isArchiveId = (v: unknown): v is string => typeof v === 'string' && ARCHIVE_ID_RE.test(v);
