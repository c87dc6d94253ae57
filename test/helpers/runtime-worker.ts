// Child process for the runtime's multi-process tests and benchmarks.
//   send <project> <sid> <channel> <count> <barrier> [to]: waits for the barrier file, sends <count>
//     messages "<sid>#<i>", prints "sent <n>".
//   owner <project> <rid,rid,...> [hang]: a Runtime delivering on change, with a driver that owns these
//     recipients; prints one JSON line per prompt `{rid, ids, at}` (at = wall-clock ms). With
//     `hang`, the first prompt never resolves (the crash window between drain and commit).
import { access } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { openRuntime } from '../../src/runtime/runtime.ts';

const [mode, project, ...rest] = process.argv.slice(2);
if (!project) throw new Error('usage: runtime-worker <mode> <project> ...');

async function barrier(file: string) {
  for (;;) {
    try {
      return await access(file);
    } catch {
      await sleep(1);
    }
  }
}

if (mode === 'send') {
  const [sid, channel, count, barrierFile, to] = rest;
  const rt = openRuntime(project);
  process.stdout.write('ready\n');
  await barrier(barrierFile!);
  let sent = 0;
  for (let i = 0; i < Number(count); i++) {
    const r = await rt.run({ op: 'send', sid: sid!, args: { channel, content: `${sid}#${i}`, ...(to ? { to } : {}) } });
    if (!r.ok) process.stdout.write(`refused ${JSON.stringify(r)}\n`);
    else sent++;
  }
  process.stdout.write(`sent ${sent}\n`);
  await rt.close();
} else if (mode === 'owner') {
  const owned = new Set(rest[0]!.split(','));
  const hang = rest[1] === 'hang';
  let prompts = 0;
  const rt = openRuntime(project, {
    deliverOnChange: true,
    log: (l) => process.stderr.write(`${l}\n`),
    driver: {
      method: 'push',
      owns: (rid) => owned.has(rid),
      deliver: async (rid, _text, ids) => {
        process.stdout.write(`${JSON.stringify({ rid, ids, at: performance.timeOrigin + performance.now() })}\n`);
        if (hang && prompts++ === 0) await new Promise(() => {});
      },
    },
  });
  await rt.start();
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => void rt.close().then(() => process.exit(0)));
} else {
  throw new Error(`unknown mode ${mode}`);
}
