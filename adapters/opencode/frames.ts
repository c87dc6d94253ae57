// Cutting a pushed batch text back into its frames (a separate module: every export of plugin.ts
// would be loaded by OpenCode as a plugin). Used on redelivery, to prompt only the frames the
// session does not hold yet.
import { BATCH_SEPARATOR, END_MARKER } from '../../src/framing.ts';

/** The frames of a `frameBatch` text, in message-id order; [] when the text is not one. A frame
 *  ends at the first batch separator after its end marker: neutralised content holds no end
 *  marker, and the notice after it holds no separator. */
export function splitFrames(text: string): string[] {
  const frames: string[] = [];
  let start = 0;
  while (start < text.length) {
    const end = text.indexOf(END_MARKER, start);
    if (end < 0) return [];
    const sep = text.indexOf(BATCH_SEPARATOR, end);
    frames.push(text.slice(start, sep < 0 ? text.length : sep));
    start = sep < 0 ? text.length : sep + BATCH_SEPARATOR.length;
  }
  return frames;
}
