// The one prompt a Codex wake sends (docs/codex-wake.md). It is fixed text plus the waiter's own
// process tag, never a byte a peer chose: the batch itself reaches the model through the
// UserPromptSubmit hook's additionalContext, which reads the tag back to find the batch.
import { processTag } from '../../src/runtime/process.ts';

const PREFIX = '[OpenComms] New messages for this session arrived (wake ';
const SUFFIX = '). They are in the context that follows.';

export const wakePrompt = (tag: string = processTag()) => `${PREFIX}${tag}${SUFFIX}`;

/** The waiter's tag a prompt names, or null when the prompt is not exactly a wake prompt. */
export function wakeTag(prompt: string | undefined): string | null {
  if (!prompt?.startsWith(PREFIX) || !prompt.endsWith(SUFFIX)) return null;
  const tag = prompt.slice(PREFIX.length, -SUFFIX.length);
  return /^\d+@[^\s()]+$/.test(tag) ? tag : null;
}
