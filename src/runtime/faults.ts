// File-system faults that are the operator's to fix, not defects of OpenComms: a store that
// refuses writes (a read-only mount, a directory another user owns). They are answered as a
// refusal that says what to do, never as `internal_error` with "Retry once".
import { refuse, type Refusal } from '../protocol/result.ts';

/** Error codes of a write the file system refused for good: retrying cannot help. */
const UNWRITABLE_CODES: ReadonlySet<string> = new Set(['EROFS', 'EACCES', 'EPERM']);
/** Error codes of a disk with no room left: freeing space is the fix. */
const FULL_CODES: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT']);

/** The refusal for a write the store's files refused for good (read-only, no permission, a full
 *  disk), or null for any other fault. */
export function unwritableStore(e: unknown, location: string): Refusal | null {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  if (typeof code !== 'string') return null;
  const fix = FULL_CODES.has(code)
    ? 'Free space on the disk that holds .opencomms'
    : UNWRITABLE_CODES.has(code)
      ? 'Make .opencomms writable for this user (remount it read-write or fix its owner and permissions)'
      : null;
  if (!fix) return null;
  return refuse(
    'store_unwritable',
    `The store of ${location} (.opencomms) refuses writes (${code}), so this change was not made. ${fix}, then retry; \`opencomms doctor\` checks it.`,
    { code },
  );
}
