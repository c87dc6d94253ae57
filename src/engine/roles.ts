// The role block a member's own model sees (protocol.md "Words", "OpenCode plugin"; hosts.md "The hook runner"): one section
// per membership, never sent to peers. Hosts inject it where they can (system text, hook context).
import { ROLE_HEADER } from '../protocol/limits.ts';
import type { State } from '../protocol/schema.ts';
import { memberships } from './lookup.ts';

export const roleInstructions = (state: Readonly<State>, sid: string): string[] =>
  memberships(state, sid).map(
    ({ ch, m }) => `${ROLE_HEADER}\nYou are ${m.role} in the OpenComms channel "${ch.name}".\n${m.role_prompt}`,
  );
