// Transition coverage: every transition declared in every machine is taken by at least one
// generated path. Adding a transition that no path reaches fails here.
import { describe, expect, it } from 'vitest';
import { MACHINES, type MachineName } from '../../machines/index.ts';
import { declaredTransitions, generatePaths, replay } from './paths.ts';

describe('transition coverage of generated paths', () => {
  for (const name of Object.keys(MACHINES) as MachineName[]) {
    it(`${name}: every declared transition is taken`, () => {
      const declared = declaredTransitions(MACHINES[name].machine as never);
      expect(declared.size).toBeGreaterThan(0);
      const taken = new Set(generatePaths(name).flatMap((p) => replay(name, p.events).taken));
      const missing = [...declared].filter(([t]) => !taken.has(t)).map(([, id]) => id);
      expect(missing).toEqual([]);
    });
  }
});
