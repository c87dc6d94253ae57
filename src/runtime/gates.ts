// The roster rule both adapters apply before the engine (protocol.md "Check order", "Result shape"):
// a caller on no live roster is refused with the adapter's own reason (MCP `identity_not_member`,
// OpenCode `not_linked`), except that a channel-scoped call naming a tombstone is left to the
// engine, whose `lifecycle_refused` takes precedence.
import { channelNamed, onLiveRoster } from '../engine/lookup.ts';
import type { Refusal } from '../protocol/result.ts';
import type { State } from '../protocol/schema.ts';

export function rosterGate(
  state: Readonly<State>,
  sid: string,
  channelArg: unknown,
  refusal: () => Refusal,
): Refusal | null {
  if (onLiveRoster(state, sid)) return null;
  const ch = channelNamed(state, channelArg);
  if (ch !== undefined && ch.lifecycle !== 'active') return null;
  return refusal();
}
