// Local probe (not in `npm run bench`): engine-only cost of a send and of a 100-message pull.
import { apply, type Command } from '../src/engine/index.ts';
import { emptyState, type State } from '../src/protocol/schema.ts';

let n = 0;
const env = () => ({ now: 1e12 + n * 10, by: 'p@h', mint: (p: 'ocm' | 'chn' | 'cor') => `${p}_${(++n).toString(16).padStart(32, '0')}` });
const who = (sid: string, mode: string) => ({ session_id: sid, host: 'x', surface: 'cli', delivery_mode: mode, host_session_id: sid, project_id: 'local-project', worktree: '/w' });
const run = (s: State, c: Command) => apply(s, c, env()).state;
let s = emptyState();
s = run(s, { op: 'create', caller: who('a', 'push'), args: { channel: 'x', role: 'A', role_prompt: 'p', rate_limit: 1000 } });
s = run(s, { op: 'join', caller: who('r', 'pull'), args: { channel: 'x', role: 'R', role_prompt: 'p' } });
const sends: number[] = [];
for (let i = 0; i < 2000; i++) {
  const t = performance.now();
  s = run(s, { op: 'send', sid: 'a', args: { channel: 'x', content: `m ${i}` } });
  sends.push(performance.now() - t);
  if (i % 100 === 99) s = run(s, { op: 'pull', sid: 'r', args: { limit: 100 } });
}
sends.sort((a, b) => a - b);
console.log('engine send p50 ms', sends[1000]!.toFixed(3));
