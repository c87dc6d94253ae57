import { join } from 'node:path';
import { ROOT, connectMcp, message, stats, withProject } from './lib.ts';
await withProject(async (dir) => {
  const prof = process.argv[2] === 'prof' ? ['--cpu-prof', '--cpu-prof-dir=/tmp/mcpprof'] : [];
  const a = await connectMcp([...prof, join(ROOT, 'dist', process.env.PROFBUNDLE ?? 'opencomms-mcp.mjs'), dir], { OPENCOMMS_MEMBER_ID: 'sess_aaaaaaaaaaaaaaaaaaaaaaaa' });
  const b = await connectMcp([join(ROOT, 'dist', 'opencomms-mcp.mjs'), dir], { OPENCOMMS_MEMBER_ID: 'sess_bbbbbbbbbbbbbbbbbbbbbbbb' });
  await a.call('opencomms_create', { channel: 'c', role: 'W', role_prompt: 'p', rate_limit: 1000 });
  await b.call('opencomms_join', { channel: 'c', role: 'R', role_prompt: 'p' });
  await b.close();
  const xs: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < 900; i++) {
    const t = performance.now();
    const r = await a.call('opencomms_send', { channel: 'c', content: message(i) });
    xs.push(performance.now() - t);
    if (!r.ok) throw new Error(r.message);
  }
  console.log('total', (performance.now() - t0).toFixed(0), JSON.stringify(stats(xs)), 'first100', JSON.stringify(stats(xs.slice(0, 100))), 'last100', JSON.stringify(stats(xs.slice(-100))));
  await a.close();
});
