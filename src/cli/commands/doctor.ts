// `opencomms doctor [--fix] [--json]` (operator.md "Command line"): rows of [OK] / [WARN] / [FAIL]; exit 1 if
// any FAIL remains.
import type { DoctorReport } from '../../doctor/doctor.ts';
import { RefusalError, type Refusal } from '../../protocol/result.ts';
import type { CliCommand } from '../command.ts';
import { EXIT_FAIL, EXIT_OK, projectOf } from '../context.ts';

export const renderDoctor = (d: DoctorReport, summary: string) =>
  [...d.fixed.map((f) => `fixed: ${f}`), ...d.rows.map((r) => `[${r.level}] ${r.check}: ${r.detail}`), summary].join(
    '\n',
  );

export const doctor: CliCommand = {
  register(program, ctx) {
    program
      .command('doctor')
      .description('check state, locks, installs, pins and Node; --fix repairs what is safe to repair')
      .option(
        '--fix',
        'remove stale locks and temp files, sweep orphaned in-flight mail, re-register the OpenCode plugin entry',
      )
      .option('--json', 'one {ok, message, data} document')
      .action(async (o: { fix?: boolean; json?: boolean }, cmd) => {
        const { doctor: runDoctor } = await import('../../doctor/doctor.ts'); // loaded when it runs
        let project: string | Refusal;
        try {
          project = projectOf(cmd, ctx.io);
        } catch (e) {
          if (!(e instanceof RefusalError)) throw e;
          project = e.refusal; // a report still: its project row says what is wrong
        }
        const r = await runDoctor(project, { fix: o.fix });
        // A failing report is still a report: its rows go to stdout either way; the exit code says FAIL.
        ctx.io.out(o.json ? `${JSON.stringify(r)}\n` : `${renderDoctor(r.data!, r.message)}\n`);
        ctx.exit(r.ok ? EXIT_OK : EXIT_FAIL);
      });
  },
};
