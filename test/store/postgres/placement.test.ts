// Which machine each member and process is on, and whether its lease holds, as `status`,
// `members`, the console's API and `watch` show it, on a project bound to a real PostgreSQL: a
// process of another machine that holds its lease, one whose lease expired (and whose tag
// carries a hostname with terminal control characters, which no output may print as such), and
// a member of this machine.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsole } from '../../../src/console/server.ts';
import { machineId } from '../../../src/runtime/machine.ts';
import { Runtime } from '../../../src/runtime/runtime.ts';
import { PgStore } from '../../../src/store/postgres/store.ts';
import { streamChanges } from '../../../src/cli/watch/stream.ts';
import type { WatchLine } from '../../../src/cli/watch/diff.ts';
import { cli } from '../../cli/fixtures.ts';
import { send } from '../../console/fixtures.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';

const M2 = '22222222-2222-4222-8222-222222222222';
const M3 = '33333333-3333-4333-8333-333333333333';
const HOLDS = `4242@build-box/${M2}`;
const EVIL = `7777@evil\u001b[2Jbox/${M3}`;
const key = newProjectKey('place');
const savedPassword = process.env.PGPASSWORD;
let dir: string;
const runtimes: Runtime[] = [];
const stores: PgStore[] = [];

const caller = (sid: string, delivery_mode: 'push' | 'pull') => ({
  session_id: sid,
  host: 'host-push',
  surface: 'cli',
  delivery_mode,
  host_session_id: sid,
  project_id: key,
  worktree: '/srv/project',
});

/** A runtime with the tag of a process of some computer, on the project's store. */
function runtime(tag?: string): Runtime {
  const rt = new Runtime(new PgStore({ url: testDatabaseUrl(), key }), {
    ...(tag ? { tag } : {}),
    log: () => {},
    driver: { method: 'push', deliver: async () => {} },
  });
  runtimes.push(rt);
  return rt;
}

async function ok(p: Promise<{ ok: boolean; message: string }>) {
  const r = await p;
  expect(r.ok, r.message).toBe(true);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-place-'));
  // The binding records no password: one in the test URL goes by PGPASSWORD, as a user's would.
  const url = new URL(testDatabaseUrl());
  if (url.password) process.env.PGPASSWORD = decodeURIComponent(url.password);
  url.password = '';
  expect((await cli('store', 'init', url.toString(), '--key', key, '--project', dir)).code).toBe(0);
  // The leases are taken here, not by the runtimes' keepers: a keeper would sweep the expired one.
  const leases = new PgStore({ url: testDatabaseUrl(), key });
  stores.push(leases);
  // On another machine, a long-lived process whose lease holds, hosting "sess_b".
  await leases.leases.renew(HOLDS, M2, 60_000);
  const b = runtime(HOLDS);
  await ok(
    b.run({
      op: 'create',
      caller: caller('sess_b', 'push'),
      args: { channel: 'team', role: 'Builder', role_prompt: 'Build.' },
    }),
  );
  await b.serve('sess_b');
  // On a third machine, a process that claimed "sess_c" and whose lease then ran out.
  const c = runtime(EVIL);
  await ok(
    c.run({ op: 'join', caller: caller('sess_c', 'push'), args: { channel: 'team', role: 'Gone', role_prompt: 'g' } }),
  );
  await c.serve('sess_c');
  await leases.leases.renew(EVIL, M3, 200);
  // This machine: a pull member (no process owns it).
  await ok(
    runtime().run({
      op: 'join',
      caller: caller('sess_a', 'pull'),
      args: { channel: 'team', role: 'Reader', role_prompt: 'r' },
    }),
  );
  await new Promise((r) => setTimeout(r, 400));
});

afterAll(async () => {
  for (const rt of runtimes) await rt.close();
  for (const s of stores) await s.close();
  if (savedPassword === undefined) delete process.env.PGPASSWORD;
  else process.env.PGPASSWORD = savedPassword;
  await dropProject(key);
  await rm(dir, { recursive: true, force: true });
});

const places = {
  Builder: {
    machine: M2,
    machine_name: 'build-box',
    this_machine: false,
    process: HOLDS,
    lease: 'holds',
  },
  Gone: { machine: M3, machine_name: null, this_machine: false, process: EVIL, lease: 'expired' },
  Reader: { machine: machineId(), this_machine: true, process: null, lease: 'n/a' },
};

describe('computers and leases in the operator views (PostgreSQL store)', () => {
  it('status --json: each member with its computer and lease; every process with a lease', async () => {
    const j = (await cli('status', '--json', '--project', dir)).json();
    expect(j.ok).toBe(true);
    const team = j.data.channels.find((c: { name: string }) => c.name === 'team');
    for (const m of team.members) expect(m).toMatchObject(places[m.role as keyof typeof places]);
    expect(j.data.machine).toBe(machineId());
    const procs = j.data.processes.filter((p: { process: string }) => [HOLDS, EVIL].includes(p.process));
    expect(procs).toMatchObject([
      { pid: 4242, machine: M2, machine_name: 'build-box', this_machine: false, lease: 'holds' },
      { pid: 7777, machine: M3, machine_name: null, this_machine: false, lease: 'expired' },
    ]);
    expect(procs[0].expires_in_ms).toBeGreaterThan(0);
    expect(procs[1].expires_in_ms).toBeLessThan(0);
  });

  it('status and members in a terminal: short computer ids, plain hostnames only, no control characters', async () => {
    const status = await cli('status', '--project', dir);
    expect(status.out).toContain('  Builder (host-push, delivery: push, computer 22222222 (build-box), lease holds)');
    expect(status.out).toContain('  Gone (host-push, delivery: push, computer 33333333, lease expired)');
    expect(status.out).toContain(
      `  Reader (host-push, delivery: pull, computer ${machineId().slice(0, 8)}, this computer, lease n/a)`,
    );
    expect(status.out).toMatch(/\n {2}pid 4242 on computer 22222222 \(build-box\): lease holds \(\d+ s left\)\n/);
    expect(status.out).toMatch(/\n {2}pid 7777 on computer 33333333: lease expired \(\d+ s ago\)\n/);
    const members = await cli('members', 'team', '--project', dir);
    expect(members.out).toContain(
      'Builder: host=host-push surface=cli delivery=push computer=22222222 (build-box) lease=holds',
    );
    expect(members.out).toContain('Gone: host=host-push surface=cli delivery=push computer=33333333 lease=expired');
    for (const out of [status.out, members.out]) expect(out).not.toContain('\u001b');
    const j = (await cli('members', 'team', '--json', '--project', dir)).json();
    for (const a of j.data.agents) expect(a).toMatchObject(places[a.role as keyof typeof places]);
  });

  it("the console's members API answers the same places", async () => {
    const server = await startConsole({ project: dir, port: 0, log: () => {} });
    try {
      const r = await send(server.port, 'GET', '/api/channels/team/members');
      expect(r.status).toBe(200);
      for (const a of r.json.data.agents) expect(a).toMatchObject(places[a.role as keyof typeof places]);
      expect(r.json.data.machine).toBe(machineId());
    } finally {
      await server.close();
    }
  });

  it('watch: a line when a lease appears and when it runs out; recipient lines name the computer', async () => {
    const store = new PgStore({ url: testDatabaseUrl(), key });
    stores.push(store);
    const lines: WatchLine[] = [];
    const w = await streamChanges(store, { log: () => {}, onLines: (l) => lines.push(...l) });
    const tag = `5151@late-box/${M3}`;
    const leases = new PgStore({ url: testDatabaseUrl(), key });
    stores.push(leases);
    // Long enough to be seen holding on a loaded machine; then it is left to run out.
    const renewed = Date.now();
    await leases.leases.renew(tag, M3, 3_000);
    // A state change wakes the watch at once (its lease look follows every wake-up).
    const d = runtime(tag);
    await ok(
      d.run({
        op: 'join',
        caller: caller('sess_d', 'pull'),
        args: { channel: 'team', role: 'Late', role_prompt: 'l' },
      }),
    );
    const until = async (what: string, f: () => boolean) => {
      const end = Date.now() + 10_000;
      while (!f()) {
        if (Date.now() > end) throw new Error(`no ${what} line: ${JSON.stringify(lines)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const processLine = (to: string) => () =>
      lines.some((l) => l.kind === 'process' && l.process === tag && l.to === to);
    await until('new lease', processLine('holds'));
    expect(lines.find((l) => l.kind === 'process' && l.process === tag)).toMatchObject({
      pid: 5151,
      machine: M3,
      from: null,
    });
    await until('recipient', () => lines.some((l) => l.kind === 'recipient' && l.role === 'Late'));
    expect(lines.find((l) => l.kind === 'recipient' && l.role === 'Late')).toMatchObject({ machine: M3 });
    await new Promise((r) => setTimeout(r, renewed + 3_200 - Date.now()));
    await ok(d.run({ op: 'pause', sid: 'sess_d', args: { channel: 'team' } }));
    await until('expired lease', processLine('expired'));
    await w.close();
  });
});
