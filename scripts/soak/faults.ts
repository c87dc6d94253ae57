// `npm run soak -- --faults`: the long form of test/store/faults.test.ts. Every fault point the
// recorder finds (operation × file-system call × fault, at both durability levels) is run, and the
// journal is cut at every byte offset of its last line under processes holding its old length.
// One JSON line says how many points ran and what failed; exit 1 on any failure.
//
//   npm run soak -- --faults            every point and every offset
//   options: --limit N (fault points per scenario and level, seeded sample)  --seed N
import { Bench, faultPoints, lastLine, runCut, runPoint, sample, SCENARIOS } from '../../test/helpers/faults.ts';
import { send } from '../../test/helpers/mail.ts';

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
          if (wrong) failures.push(`${durability} ${s.name}: ${point.kind} at call ${point.at} (${point.call.op} ${point.call.path.replace(/.*\.opencomms\//, '')}): ${wrong}`);
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
    const line = { figure: 'store faults', fault_points_found: found, fault_points_run: covered, cut_offsets: cuts, failures: failures.length, seconds: Math.round((Date.now() - started) / 1000) };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    for (const f of failures.slice(0, 20)) process.stderr.write(`FAIL ${f}\n`);
    return failures.length === 0;
  } finally {
    await bench.dispose();
  }
}
