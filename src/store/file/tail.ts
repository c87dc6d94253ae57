// The append-only files (journal, history logs) are JSON lines: a file whose last byte is not a
// newline ends in a torn line (a write cut short), and the next append starts a fresh line.
import { storeFs } from './fs.ts';

/** The byte that ends every line of those files. */
export const NL = 0x0a;

/** Whether the open file of `size` (> 0) bytes ends with a newline. */
export function endsWithNewline(fd: number, size: number): boolean {
  const b = Buffer.alloc(1);
  storeFs.readSync(fd, b, 0, 1, size - 1);
  return b[0] === NL;
}
