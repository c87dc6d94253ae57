// `npm run soak -- --faults`: the long form of test/store/faults.test.ts. Every fault point the
// recorder finds (operation × file-system call × fault, at both durability levels) is run, and the
// journal is cut at every byte offset of its last line under processes holding its old length.
// Then every crash state (test/helpers/crash.ts) of a send, a pull, a compaction and a journal's
// first line at both levels. One JSON line per part says how many ran and what failed (at
// `default`, how many power-loss states lose acknowledged mail: the documented promise); exit 1
// on any failure.
//
//   npm run soak -- --faults            every point and every offset
//   options: --limit N (fault points per scenario and level, seeded sample)  --seed N
import { Bench, faultPoints, lastLine, runCut, runPoint, sample, SCENARIOS } from '../../test/helpers/faults.ts';
import { send } from '../../test/helpers/mail.ts';
import { checkCrash, CRASH_OPERATIONS } from '../../test/helpers/crash.ts';

export async function faults(argv: string[]): Promise<boolean> {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? Number(argv[i + 1]) : undefined;
  };
  const limit = arg('--limit') ?? Infinity;
  const seed = arg('--seed') ?? 2026;
  const started = Date.now();
  const bench = new Bench();
  const failures: string[] = [];
  let found = 0;
  let covered = 0;
  try {
    for (const durability of ['default', 'durable'] as const) {
      for (const s of SCENARIOS) {
        const scenario = { ...s, options: { ...s.options, durability } };
        const template = await bench.template(s.pending, s.setup);
        const points = await faultPoints(bench, scenario, template);
        found += points.length;
        for (const point of sample(points, limit, seed)) {
          const wrong = await runPoint(bench, scenario, template, point);
          covered++;
          if (wrong)
            failures.push(
              `${durability} ${s.name}: ${point.kind} at call ${point.at} (${point.call.op} ${point.call.path.replace(/.*\.opencomms\//, '')}): ${wrong}`,
            );
        }
      }
    }
    const template = await bench.template(['one', 'two'], async (p) => {
      if (!(await send(p, 'three')).ok) throw new Error('template: send refused');
    });
    const { start, end } = lastLine(template);
    let cuts = 0;
    for (let at = start; at <= end; at++) {
      const wrong = await runCut(bench, template, at);
      cuts++;
      if (wrong) failures.push(wrong);
    }
    const line = {
      figure: 'store faults',
      fault_points_found: found,
      fault_points_run: covered,
      cut_offsets: cuts,
      failures: failures.length,
      seconds: Math.round((Date.now() - started) / 1000),
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    const crash = await crashStates(bench, limit, seed, failures);
    for (const f of failures.slice(0, 20)) process.stderr.write(`FAIL ${f}\n`);
    return failures.length === 0 && crash;
  } finally {
    await bench.dispose();
  }
}

/** Every crash state of each operation at both levels: one JSON line each. */
async function crashStates(bench: Bench, limit: number, seed: number, failures: string[]): Promise<boolean> {
  let ok = true;
  for (const durability of ['default', 'durable'] as const) {
    for (const op of CRASH_OPERATIONS) {
      const r = await checkCrash(bench, op, durability, limit, seed);
      const powerLosses = r.losses.length - r.killLosses;
      const line = {
        figure: 'store crash states',
        operation: op.name,
        durability,
        ops: r.ops.length,
        kill_states: r.kill,
        power_states: r.power,
        checked: r.checked,
        not_loading: r.broken.length,
        kill_states_losing: r.killLosses,
        power_states_losing: powerLosses,
      };
      process.stdout.write(`${JSON.stringify(line)}\n`);
      const bad = [...r.broken, ...r.losses.slice(0, r.killLosses), ...(durability === 'durable' ? r.losses : [])];
      for (const b of bad) failures.push(`${durability} ${op.name}: ${b}`);
      if (bad.length) ok = false;
    }
  }
  return ok;
}
