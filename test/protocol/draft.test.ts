// The change tracker behind in-place mutations: whatever a mutation does through the draft,
// rollback restores the state exactly, and the recorded operations replayed on a copy of the
// state before reproduce the state after.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyOps, raw, track } from '../../src/protocol/draft.ts';

type Tree = Record<string, unknown>;

const key = fc.constantFrom('a', 'b', 'c', 'd', 'e');
const leaf = fc.oneof(fc.integer({ min: -5, max: 5 }), fc.string({ maxLength: 3 }), fc.constant(null), fc.boolean());
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    leaf,
    fc.array(tie('v'), { maxLength: 4 }),
    fc.dictionary(key, tie('v'), { maxKeys: 4 }),
  ),
})).v;
const tree = fc.dictionary(key, fc.dictionary(key, value, { maxKeys: 4 }), { maxKeys: 4 });

/** One write somewhere in the tree, addressed by a walk of indices into whatever is there. */
type Action =
  | { kind: 'set'; walk: number[]; key: string; value: unknown }
  | { kind: 'delete'; walk: number[]; key: string }
  | { kind: 'push'; walk: number[]; value: unknown }
  | { kind: 'splice'; walk: number[]; start: number; count: number }
  | { kind: 'replace-map'; walk: number[]; key: string }
  | { kind: 'sort'; walk: number[] }
  | { kind: 'truncate'; walk: number[]; to: number };

const walk = fc.array(fc.nat(), { maxLength: 5 });
const action: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), walk, key, value }),
  fc.record({ kind: fc.constant('delete' as const), walk, key }),
  fc.record({ kind: fc.constant('push' as const), walk, value }),
  fc.record({ kind: fc.constant('splice' as const), walk, start: fc.nat(3), count: fc.nat(2) }),
  fc.record({ kind: fc.constant('replace-map' as const), walk, key }),
  fc.record({ kind: fc.constant('sort' as const), walk }),
  fc.record({ kind: fc.constant('truncate' as const), walk, to: fc.nat(2) }),
);

/** Follows `walk` through objects and arrays (through the draft, so reads are wrapped). */
function locate(root: unknown, steps: number[]): unknown {
  let cur = root;
  for (const n of steps) {
    if (typeof cur !== 'object' || cur === null) break;
    const keys = Object.keys(cur);
    if (!keys.length) break;
    const next = (cur as Record<string, unknown>)[keys[n % keys.length]!];
    if (typeof next !== 'object' || next === null) break;
    cur = next;
  }
  return cur;
}

function perform(root: Tree, a: Action) {
  const at = locate(root, a.walk) as Record<string, unknown> | unknown[];
  if (Array.isArray(at)) {
    if (a.kind === 'push') at.push(structuredClone(a.value));
    else if (a.kind === 'splice') at.splice(a.start, a.count);
    else if (a.kind === 'sort') at.sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
    else if (a.kind === 'truncate') at.length = Math.min(at.length, a.to);
    else if (a.kind === 'set') at[0] = structuredClone((a as { value: unknown }).value);
    return;
  }
  if (a.kind === 'set') at[a.key] = structuredClone(a.value);
  else if (a.kind === 'delete') delete at[a.key];
  else if (a.kind === 'replace-map') {
    // What a machine's assign does: a fresh object built from the old one.
    const old = at[a.key];
    at[a.key] = typeof old === 'object' && old !== null && !Array.isArray(old) ? { ...old, z: 1 } : { z: 1 };
  } else if (a.kind === 'push') {
    const old = at.a;
    if (Array.isArray(old)) old.push(structuredClone(a.value));
    else at.a = [structuredClone(a.value)];
  }
}

describe('track', () => {
  it('rollback restores the tree exactly; the ops replayed on the old tree give the new one, and their undo the old one', () => {
    fc.assert(
      fc.property(tree, fc.array(action, { maxLength: 12 }), (t, actions) => {
        const before = structuredClone(t);
        const live = structuredClone(t);
        const d = track(live);
        for (const a of actions) perform(d.root, a);
        const after = structuredClone(live);
        const ops = d.ops();
        const replayed = structuredClone(before);
        const undo = applyOps(replayed, JSON.parse(JSON.stringify(ops)));
        expect(replayed).toEqual(after);
        undo(); // a replayed journal entry found invalid leaves no trace
        expect(replayed).toEqual(before);
        // Rollback from a second run of the same actions.
        const again = structuredClone(before);
        const d2 = track(again);
        for (const a of actions) perform(d2.root, a);
        d2.rollback();
        expect(again).toEqual(before);
      }),
      { numRuns: 1000 },
    );
  });

  it('appends to an array are one append op; a send-like write records only what changed', () => {
    const state = {
      queues: { r: ['m1', 'm2'] },
      messages: { m1: { s: 'pending', t: [['SEND']] } },
      channels: { c: { seen: { k1: 1 } as Record<string, number>, rate: { n: 1 } } },
    };
    const d = track(state);
    d.root.queues.r.push('m3');
    d.root.messages.m1.t.push(['DRAIN']);
    (d.root.messages as Record<string, unknown>).m3 = { s: 'pending' };
    d.root.channels.c.seen = { ...d.root.channels.c.seen, k2: 2 };
    d.root.channels.c.rate.n = 2;
    // In the order of the first writes, so that a replay adds new keys in the writer's order.
    expect(d.ops()).toEqual([
      ['a', ['queues', 'r'], ['m3']],
      ['a', ['messages', 'm1', 't'], [['DRAIN']]],
      ['s', ['messages', 'm3'], { s: 'pending' }],
      ['s', ['channels', 'c', 'seen', 'k2'], 2],
      ['s', ['channels', 'c', 'rate', 'n'], 2],
    ]);
  });

  it('an entry of a map written in place is its own op; a write deeper is cut to four', () => {
    const state = {
      channels: {
        c: { seen: { k1: 1, k2: 2 } as Record<string, number>, timer: { elapsed: { a: 1 } as Record<string, number> } },
      },
    };
    const d = track(state);
    delete d.root.channels.c.seen.k1;
    d.root.channels.c.seen.k3 = 3;
    d.root.channels.c.timer.elapsed.b = 2;
    const ops = d.ops();
    expect(ops).toEqual([
      ['d', ['channels', 'c', 'seen', 'k1']],
      ['s', ['channels', 'c', 'seen', 'k3'], 3],
      ['s', ['channels', 'c', 'timer', 'elapsed'], { a: 1, b: 2 }],
    ]);
    const replayed = { channels: { c: { seen: { k1: 1, k2: 2 }, timer: { elapsed: { a: 1 } } } } };
    applyOps(replayed, ops);
    expect(replayed).toEqual(state);
  });

  it('a key deleted and set again comes last on replay too', () => {
    const state = { channels: { c: { seen: { k1: 1, k2: 2 } as Record<string, number> } } };
    const replayed = structuredClone(state);
    const d = track(state);
    delete d.root.channels.c.seen.k1;
    d.root.channels.c.seen.k1 = 3;
    applyOps(replayed, d.ops());
    expect(Object.entries(replayed.channels.c.seen)).toEqual([
      ['k2', 2],
      ['k1', 3],
    ]);
    expect(Object.entries(state.channels.c.seen)).toEqual([
      ['k2', 2],
      ['k1', 3],
    ]);
  });

  it("new keys of a map arrive in the writer's order on replay", () => {
    const before = { messages: { a: 1 } as Record<string, number> };
    const live = structuredClone(before);
    const d = track(live);
    for (const k of ['z', 'm', 'b', 'y']) d.root.messages[k] = 2;
    const replayed = structuredClone(before);
    applyOps(replayed, d.ops());
    expect(Object.keys(replayed.messages)).toEqual(['a', 'z', 'm', 'b', 'y']);
  });

  it('a value assigned into the state never keeps a proxy, and raw() reads the plain objects', () => {
    const state = { channels: { c: { members: [{ id: 'a' }, { id: 'b' }] } } };
    const d = track(state);
    const kept = d.root.channels.c.members.filter((m) => m.id === 'a'); // proxies of members
    d.root.channels.c.members = kept;
    d.ops();
    expect(raw(d.root.channels)).toBe(state.channels);
    expect(state.channels.c.members[0]).toEqual({ id: 'a' });
    expect(raw(state.channels.c.members[0])).toBe(state.channels.c.members[0]); // plain, not a proxy
    expect(() => {
      d.root.channels.c.members = [];
    }).toThrow(/after the mutation ended/);
  });
});
