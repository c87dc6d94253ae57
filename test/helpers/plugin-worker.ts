// A second OpenCode server for the plugin's multi-server tests: loads the plugin for <project> with a
// fake host, reports `session.idle` for each session in <sids> (the sessions live in this server),
// then takes `busy <sid>` / `idle <sid>` lines on stdin as host events and prints one JSON line per
// prompt it makes: {id, text, ok}.
import { createInterface } from 'node:readline';
import { fakeClient, idle, loadPlugin } from './opencode-fake.ts';

const [project, sids] = process.argv.slice(2);
const { client, prompts } = fakeClient();
const hooks = await loadPlugin(project!, client);
await new Promise((r) => setTimeout(r, 50)); // the plugin starts once the host serves
for (const sid of (sids ?? '').split(',').filter(Boolean)) await idle(hooks, sid);
let shown = 0;
setInterval(() => {
  while (shown < prompts.length) process.stdout.write(`${JSON.stringify(prompts[shown++])}\n`);
}, 20);
createInterface({ input: process.stdin }).on('line', async (line) => {
  const [what, sid] = line.trim().split(' ');
  if (what === 'idle') await idle(hooks, sid!);
  else if (what === 'busy')
    await hooks.event!({
      event: { type: 'session.status', properties: { sessionID: sid, status: { type: 'busy' } } },
    } as never);
  process.stdout.write(`did ${line.trim()}\n`);
});
process.stdout.write('ready\n');
process.on('SIGTERM', () => process.exit(0));
