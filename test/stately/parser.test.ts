// Stately's editor and VS Code extension read a machine with `@xstate/machine-extractor`. Every file
// of machines/ goes through it here, and what it reads must equal what the runtime runs (the graph
// `@xstate/graph` builds from machines/index.ts): the same states, events, transitions, targets,
// guards and actions, in the same order. A machine written in a way Stately can no longer read
// (a computed key, a spread, a guard built in code) fails this test.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MACHINES, type MachineName } from '../../machines/index.ts';
import { extractor, type MachineShape, shapeOfParsed, shapeOfRuntime } from './extract.ts';

const dir = join(import.meta.dirname, '..', '..', 'machines');
const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));

/** Every machine the parser finds in machines/, by the file it is in. */
const parsed = new Map<string, MachineShape[]>(
  files.map((f) => {
    const r = extractor.extractMachinesFromFile(readFileSync(join(dir, f), 'utf8'));
    const configs = (r?.machines ?? []).map((m) => m?.toConfig() ?? null);
    return [f, configs.map((c) => (c === null ? ({ id: '(unreadable)' } as MachineShape) : shapeOfParsed(c)))];
  }),
);

describe("Stately's parser (@xstate/machine-extractor) reads machines/ as the runtime runs it", () => {
  it('finds exactly the four machines of the registry, one per file named after it', () => {
    const found = [...parsed].flatMap(([f, ms]) => ms.map((m) => `${f}:${m.id}`));
    expect(found.sort()).toEqual(
      Object.keys(MACHINES)
        .map((n) => `${n}.ts:${n}`)
        .sort(),
    );
  });

  for (const name of Object.keys(MACHINES) as MachineName[]) {
    const runtime = shapeOfRuntime(MACHINES[name].machine as never);
    const read = () => parsed.get(`${name}.ts`)?.[0];
    it(`${name}: the same states, final states and initial state`, () => {
      expect(read()?.initial).toBe(runtime.initial);
      expect(read()?.states).toEqual(runtime.states);
    });
    it(`${name}: the same events`, () => {
      const events = (s: MachineShape | undefined) => [...new Set(s?.transitions.map((t) => t.event))].sort();
      expect(events(read())).toEqual(events(runtime));
    });
    it(`${name}: the same guard names`, () => {
      const guards = (s: MachineShape | undefined) =>
        [...new Set(s?.transitions.flatMap((t) => (t.guard ? [t.guard] : [])))].sort();
      expect(guards(read())).toEqual(guards(runtime));
    });
    it(`${name}: every transition, in order, with its target, guard and actions`, () => {
      expect(read()?.transitions).toEqual(runtime.transitions);
      expect(runtime.transitions.length).toBeGreaterThan(0);
    });
  }

  it('a machine written so the parser cannot read it is caught (a guard name built in code, a spread transition)', () => {
    const source = readFileSync(join(dir, 'envelope.ts'), 'utf8');
    const runtime = shapeOfRuntime(MACHINES.envelope.machine as never);
    const mutants = [
      source.replace("guard: 'attemptsExhausted'", "guard: ['attempts', 'Exhausted'].join('')"),
      source.replace(
        "COMMIT: { target: 'delivered', actions: 'markDelivered' },",
        "...{ COMMIT: { target: 'delivered', actions: 'markDelivered' } },",
      ),
    ];
    for (const m of mutants) {
      expect(m).not.toBe(source);
      const config = extractor.extractMachinesFromFile(m)?.machines[0]?.toConfig();
      expect(config ? shapeOfParsed(config).transitions : null).not.toEqual(runtime.transitions);
    }
  });
});
