// One vitest case per generated path: the replay through the persisted form must end where the
// graph traversal ended, value and context.
import { describe, expect, it } from 'vitest';
import { MACHINES, type MachineName } from '../../machines/index.ts';
import { generatePaths, replay, replayWithStep } from './paths.ts';

for (const name of Object.keys(MACHINES) as MachineName[]) {
  describe(`${name} machine paths`, () => {
    const paths = generatePaths(name);
    it('has both shortest and simple paths', () => {
      expect(paths.some((p) => p.kind === 'shortest')).toBe(true);
      expect(paths.some((p) => p.kind === 'simple')).toBe(true);
    });
    it("the engine's step() agrees with transition() on every path", () => {
      for (const path of paths)
        expect(replayWithStep(name, path.events), path.name).toEqual({ value: path.value, context: path.context });
    });
    it.each(paths.map((p) => [p.name, p] as const))('%s', (_label, path) => {
      const end = replay(name, path.events);
      expect(end.value).toEqual(path.value);
      expect(end.context).toEqual(path.context);
    });
  });
}
