// The operator's hand on wakes (operator.md "Wakes and their cost"): release a hold, set a live
// channel's wake budgets. Both wake the released members' owners, who drain the held mail.
import { ok, refuse, type Refusal } from '../protocol/result.ts';
import type { Member, State } from '../protocol/schema.ts';
import { clampOptions, wakeBudgetFields } from './link.ts';
import { operatorChannel } from './membership.ts';
import { done, refused } from './outcome.ts';
import type { Env, Outcome } from './types.ts';
import { releaseHolds, wakeLine } from './wakes.ts';

/** A member named by id or role (any case). */
const named = (members: readonly Member[], who: string) =>
  members.find((m) => m.session_id === who || m.role.toLowerCase() === who.toLowerCase());

export function releaseWakes(state: State, args: { channel: unknown; member?: unknown }, env: Env): Outcome {
  const scoped = operatorChannel(state, args.channel);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const { ch } = scoped;
  let targets = ch.members;
  if (typeof args.member === 'string' && args.member.trim()) {
    const m = named(ch.members, args.member.trim());
    if (!m)
      return refused(
        state,
        refuse(
          'target_not_found',
          `No member "${args.member}" on "${ch.name}"; \`opencomms members ${ch.name}\` lists them.`,
        ),
      );
    targets = [m];
  }
  const released = releaseHolds(
    state,
    ch,
    targets.map((m) => m.session_id),
    env.now,
  );
  const roles = targets.filter((m) => released.includes(m.session_id)).map((m) => m.role);
  return done(
    state,
    ok(
      released.length
        ? `Released the wakes of ${roles.join(', ')} on "${ch.name}": their held mail starts a turn now.`
        : `No wake is held on "${ch.name}"${targets.length === 1 ? ` for ${targets[0]!.role}` : ''}.`,
      { released, roles },
    ),
    released.length ? [{ type: 'Wake', recipients: released }] : [],
    undefined,
    released.length > 0,
  );
}

export function setWakeBudget(
  state: State,
  args: { channel: unknown; max_wakes_per_member?: unknown; max_wakes_per_channel?: unknown },
  env: Env,
): Outcome {
  const scoped = operatorChannel(state, args.channel);
  if ('refusal' in scoped) return refused(state, scoped.refusal);
  const { ch } = scoped;
  const given = wakeBudgetFields(args).filter((f) => f.raw !== undefined);
  if (!given.length)
    return refused(
      state,
      refuse(
        'invalid_argument',
        'Give max_wakes_per_member and/or max_wakes_per_channel (a number, or null for none).',
      ),
    );
  const opts = clampOptions(given);
  if ('ok' in opts) return refused(state, opts as Refusal);
  for (const [k, v] of Object.entries(opts)) (ch.budgets as Record<string, unknown>)[k] = v;
  // Members a budget held get their turn when the new budget allows it.
  const held = ch.members.filter((m) => wakeLine(ch, m.session_id).held_by === 'wake_budget').map((m) => m.session_id);
  return done(
    state,
    ok(
      `Wake budgets of "${ch.name}": ${ch.budgets.max_wakes_per_member ?? 'none'} per member, ${ch.budgets.max_wakes_per_channel ?? 'none'} per channel, per hour.`,
      { budgets: { ...ch.budgets }, now: env.now },
    ),
    held.length ? [{ type: 'Wake', recipients: held }] : [],
  );
}

/** A turn of `sid`'s host session that OpenComms did not start (a person typed), on a host whose
 *  hooks cannot hand mail over at it (OpenCode): the loop the member was held in is broken, so its
 *  held mail goes at the session's next wake, with the hold's notice, as one batch. */
export function personTurn(state: State, sid: string, env: Env): Outcome {
  const released = Object.values(state.channels)
    .filter((ch) => ch.lifecycle === 'active' && ch.members.some((m) => m.session_id === sid))
    .flatMap((ch) => (wakeLine(ch, sid).held_by === 'loop' ? releaseHolds(state, ch, [sid], env.now) : []));
  return done(
    state,
    ok(released.length ? `A person's turn ended the loop hold of ${sid}.` : 'No loop hold to end.', { released }),
    [],
    undefined,
    released.length > 0,
  );
}
