// Sends `count` messages m<from>.. from A to B in the project given, as a separate process (no
// test hooks: the store runs as in production), and prints each answer's ok as one JSON line.
import { proc, send } from './mail.ts';

const [dir, from, count] = process.argv.slice(2);
const p = proc(dir!);
const answers: Array<{ content: string; ok: boolean; reason?: unknown }> = [];
for (let i = Number(from); i < Number(from) + Number(count); i++) {
  const r = await send(p, `m${i}`);
  answers.push({ content: `m${i}`, ok: r.ok, reason: (r.data as { reason?: unknown } | undefined)?.reason });
}
await p.close();
process.stdout.write(`${JSON.stringify(answers)}\n`);
