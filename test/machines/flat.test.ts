// The engine steps machines through flat.ts, not XState's interpreter: on random walks through
// every machine (alphabet events with shifted clocks, the record JSON round-tripped between
// steps as state.json does) each step must agree with XState's `transition()` on the next
// record, on whether anything changed, and on the actions collected. And a machine using a
// feature flat.ts does not evaluate is refused when it is compiled.
import fc from 'fast-check';
import { assign, createActor, setup, type ActorScope, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { describe, expect, it } from 'vitest';
import { compile } from '../../machines/flat.ts';
import { MACHINES, step, toSnapshot, type MachineName, type Persistence } from '../../machines/index.ts';
import { ALPHABETS } from './alphabets.ts';

type Ev = { type: string; now?: number; [k: string]: unknown };

/** XState's own pure transition, with the non-assign actions collected instead of executed. */
function xstateStep(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: Ev) {
  const collected: Array<{ type: string; params: unknown }> = [];
  const self = createActor(machine);
  const scope = {
    self,
    defer: () => {},
    id: '',
    logger: () => {},
    sessionId: '',
    stopChild: () => {},
    system: self.system,
    emit: () => {},
    actionExecutor: (a: { type: string; params: unknown }) => void collected.push({ type: a.type, params: a.params }),
  } as unknown as ActorScope<any, any>;
  const next = machine.transition(snapshot, event as never, scope) as AnyMachineSnapshot;
  return { next, changed: next !== snapshot, actions: collected };
}

/** Clocks around every deadline the alphabets use (stale windows, cooldowns, rate windows, budgets). */
const CLOCKS = [0, 1, 10, 30, 100, 500, 999, 1000, 1001, 5000, 60_000, 80_000, 100_001, 200_000];

for (const name of Object.keys(MACHINES) as MachineName[]) {
  describe(`${name}: flat step agrees with XState's transition()`, () => {
    const p = MACHINES[name] as unknown as Persistence<AnyStateMachine, unknown>;
    const { initial, events } = ALPHABETS[name];
    const walk = fc.array(fc.tuple(fc.nat(events.length - 1), fc.constantFrom(...CLOCKS)), { maxLength: 30 });

    it('on 300 random walks: next record, changed and actions', () => {
      fc.assert(
        fc.property(walk, (steps) => {
          let record: unknown = initial;
          for (const [i, now] of steps) {
            const event = { ...(events[i] as Ev), ...('now' in (events[i] as Ev) ? { now } : {}) };
            const ours = step(p, JSON.parse(JSON.stringify(record)), event as never);
            const theirs = xstateStep(
              p.machine,
              toSnapshot(p, JSON.parse(JSON.stringify(record))) as AnyMachineSnapshot,
              event,
            );
            expect(ours.changed).toBe(theirs.changed);
            expect(ours.actions).toEqual(theirs.actions);
            expect(ours.value).toEqual(theirs.next.value);
            expect(ours.record).toEqual(theirs.changed ? p.toRecord(theirs.next as never) : record);
            record = ours.record;
          }
        }),
        { numRuns: 300 },
      );
    });
  });
}

describe('compile() refuses what flat.ts does not evaluate', () => {
  const base = setup({
    types: { context: {} as { n: number }, events: {} as { type: 'GO' } },
    actions: { bump: assign({ n: ({ context }) => context.n + 1 }) },
  });
  it.each([
    [
      'an entry action',
      base.createMachine({ context: { n: 0 }, initial: 'a', states: { a: { entry: 'bump', on: { GO: 'b' } }, b: {} } }),
    ],
    [
      'nested states',
      base.createMachine({ context: { n: 0 }, initial: 'a', states: { a: { initial: 'x', states: { x: {} } } } }),
    ],
    [
      'an inline guard',
      base.createMachine({
        context: { n: 0 },
        initial: 'a',
        states: { a: { on: { GO: { guard: () => true, target: 'b' } } }, b: {} },
      }),
    ],
    [
      'a delayed transition',
      base.createMachine({ context: { n: 0 }, initial: 'a', states: { a: { after: { 10: 'b' } }, b: {} } }),
    ],
    [
      'a root-level transition',
      base.createMachine({ context: { n: 0 }, initial: 'a', on: { GO: '.b' }, states: { a: {}, b: {} } }),
    ],
    [
      'a target outside the siblings',
      base.createMachine({ id: 'm', context: { n: 0 }, initial: 'a', states: { a: { on: { GO: '#m.b' } }, b: {} } }),
    ],
  ])('%s', (_what, machine) => {
    expect(() => compile(machine as AnyStateMachine)).toThrow(/not supported|not a sibling/);
  });
});

describe('the channel machine as the planned send reads it', () => {
  it('ADMIT only gates: no transition on it assigns, so SEND is stepped from the channel as it was', () => {
    const table = compile(MACHINES.channel.machine);
    for (const [state, byEvent] of table)
      for (const c of byEvent.get('ADMIT') ?? []) expect(c.assigns, `${state} on ADMIT`).toEqual([]);
    expect([...table.values()].some((byEvent) => byEvent.has('ADMIT'))).toBe(true);
  });
});
