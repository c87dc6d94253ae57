// One agent on one machine of the network-namespace proof (machines.test.ts): a long-lived process
// that hosts one push session over a PostgreSQL store reached through its namespace's own network
// stack. It reaches the server as every OpenComms process does, on loopback: a forwarder inside the
// namespace carries 127.0.0.1:<port> over the veth pair to the test's forwarder in the root
// namespace. Commands arrive on stdin, one JSON object a line; reports leave on stdout the same way.
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { Runtime } from '../../src/runtime/runtime.ts';
import { PgStore } from '../../src/store/postgres/store.ts';
import { forwardLoopback } from './net.ts';

const [gateway, gatewayPort, localPort, key, sid, role, worktree, received] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
];
const say = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

await forwardLoopback(Number(localPort), gateway, Number(gatewayPort));

/** Hand-overs wait here while `hold` is on: the host is still taking the prompt. */
let holding = false;
const held: Array<() => void> = [];

const rt = new Runtime(new PgStore({ url: `postgres://postgres@127.0.0.1:${localPort}/test`, key }), {
  watch: true,
  log: (line) => say({ log: line }),
  driver: {
    method: 'push',
    deliver: async (_rid, _text, ids) => {
      // What the host was shown (before the commit): the test counts hand-overs from here.
      appendFileSync(received, `${ids.join('\n')}\n`);
      say({ shown: ids });
      if (holding) await new Promise<void>((r) => held.push(r));
    },
  },
});

const caller = {
  session_id: sid,
  host: 'host-push',
  surface: 'cli',
  delivery_mode: 'push',
  host_session_id: sid,
  project_id: key,
  worktree,
};

async function handle(cmd: { op: string; [k: string]: unknown }) {
  switch (cmd.op) {
    case 'start':
      await rt.start();
      return { started: rt.tag };
    case 'create':
      return rt.run({
        op: 'create',
        caller,
        args: { channel: cmd.channel, role, role_prompt: `Act as ${role}.`, rate_limit: 1000 },
      });
    case 'join':
      return rt.run({ op: 'join', caller, args: { channel: cmd.channel, role, role_prompt: `Act as ${role}.` } });
    case 'host':
      await rt.host(sid);
      return { hosted: sid };
    case 'send':
      return rt.run({ op: 'send', sid, args: { channel: cmd.channel, content: cmd.content, to: cmd.to } });
    case 'hold':
      holding = Boolean(cmd.on);
      return { holding };
    case 'release':
      for (const r of held.splice(0)) r();
      return { released: true };
  }
  return { unknown: cmd.op };
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line) as { id: number; op: string };
  try {
    say({ id: cmd.id, answer: await handle(cmd) });
  } catch (e) {
    say({ id: cmd.id, error: (e as Error).message });
  }
}
