// Local probe (not in `npm run bench`): engine-only cost of a 100-message pull on one channel.
import { apply } from '../src/engine/index.ts';
import { emptyState } from '../src/protocol/schema.ts';

let n = 0;
const env = () => ({ now: 1e12 + n, by: 'p@h', mint: (p: 'ocm' | 'chn' | 'cor') => `${p}_${(++n).toString(16).padStart(32, '0')}` });
const who = (sid: string, mode: string) => ({ session_id: sid, host: 'x', surface: 'cli', delivery_mode: mode, host_session_id: sid, project_id: 'local-project', worktree: '/w' });
const times: number[] = [];
for (let r = 0; r < 30; r++) {
  let s = emptyState();
  s = apply(s, { op: 'create', caller: who('a', 'push'), args: { channel: 'x', role: 'A', role_prompt: 'p', rate_limit: 1000 } }, env()).state;
  s = apply(s, { op: 'join', caller: who('r', 'pull'), args: { channel: 'x', role: 'R', role_prompt: 'p' } }, env()).state;
  for (let i = 0; i < 100; i++) s = apply(s, { op: 'send', sid: 'a', args: { channel: 'x', content: `m ${i} ${r}` } }, env()).state;
  const t = performance.now();
  apply(s, { op: 'pull', sid: 'r', args: { limit: 100 } }, env());
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
console.log('engine pull-100 p50 ms', times[15]!.toFixed(3));
