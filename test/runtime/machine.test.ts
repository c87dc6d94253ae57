// The machine id and the two kinds of liveness: a stable id kept in the user's config directory
// (or forced by OPENCOMMS_MACHINE_ID), process tags that name it, old tags still read, PIDs judged
// on this machine only, and leases (a snapshot) for other machines.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isMachineId, loadMachineId, machineIdFile } from '../../src/runtime/machine.ts';
import { LeaseKeeper } from '../../src/runtime/lease.ts';
import { livenessFrom, onThisMachine, parseTag, processTag } from '../../src/runtime/process.ts';
import type { LeaseStore } from '../../src/store/types.ts';

const dirs: string[] = [];
const home = () => {
  const d = mkdtempSync(join(tmpdir(), 'oc-machine-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const OTHER = '0f0f0f0f-1111-4222-8333-444455556666';
const THIS = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee';
/** A PID no process has: pid_max on Linux is at most 2^22. */
const NO_PID = 2 ** 22 + 17;

describe('machine id', () => {
  it('comes from the system machine id: every HOME of one machine gets the same, never the raw id', () => {
    const sys = join(home(), 'machine-id');
    writeFileSync(sys, '3d1219c7c4c5404aaa1f6d2a48adfda4\n');
    const a = loadMachineId({ HOME: home() }, [sys]);
    expect(isMachineId(a)).toBe(true);
    expect(loadMachineId({ HOME: home(), XDG_CONFIG_HOME: home() }, [sys])).toBe(a);
    expect(a.replaceAll('-', '')).not.toContain('3d1219c7');
    writeFileSync(sys, '0123456789abcdef0123456789abcdef\n');
    expect(loadMachineId({ HOME: home() }, [sys])).not.toBe(a);
  });

  it('without a system id, is minted once into $XDG_CONFIG_HOME/opencomms/machine-id and read back the same', () => {
    const env = { XDG_CONFIG_HOME: home(), HOME: '/nonexistent' };
    const first = loadMachineId(env, []);
    expect(isMachineId(first)).toBe(true);
    expect(machineIdFile(env)).toBe(join(env.XDG_CONFIG_HOME, 'opencomms', 'machine-id'));
    expect(readFileSync(machineIdFile(env), 'utf8').trim()).toBe(first);
    expect(loadMachineId(env, [])).toBe(first);
  });

  it('falls back to ~/.config, and OPENCOMMS_MACHINE_ID overrides every source', () => {
    const h = home();
    expect(machineIdFile({ HOME: h })).toBe(join(h, '.config', 'opencomms', 'machine-id'));
    expect(loadMachineId({ HOME: h, OPENCOMMS_MACHINE_ID: OTHER })).toBe(OTHER);
  });

  it('is the same in a separate process of the same user', () => {
    const env = { ...process.env, XDG_CONFIG_HOME: home(), OPENCOMMS_MACHINE_ID: '' };
    const mine = loadMachineId(env);
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', '-e', "import('./src/runtime/machine.ts').then((m) => process.stdout.write(m.machineId()))"],
      { env, encoding: 'utf8' },
    );
    expect(r.stdout).toBe(mine);
  });
});

describe('process tags and liveness', () => {
  it('a tag names the PID, the hostname and the machine; an old tag has no machine', () => {
    expect(parseTag(processTag(42, THIS))).toEqual({ pid: 42, hostname: hostname(), machine: THIS });
    expect(parseTag(`42@${hostname()}`)).toEqual({ pid: 42, hostname: hostname(), machine: null });
    expect(onThisMachine(`42@${hostname()}`, THIS)).toBe(true);
    expect(onThisMachine(processTag(42, OTHER), THIS)).toBe(false);
  });

  it('on this machine a process is alive by its PID, whatever the leases say', () => {
    const alive = livenessFrom({ live: new Set() }, THIS);
    expect(alive(processTag(process.pid, THIS))).toBe(true);
    expect(alive(processTag(NO_PID, THIS))).toBe(false);
    expect(alive(`${process.pid}@${hostname()}`)).toBe(true);
    expect(alive(`${NO_PID}@${hostname()}`)).toBe(false);
  });

  it('on another machine a process is alive while its lease holds; without leases it is assumed alive', () => {
    const remote = processTag(NO_PID, OTHER);
    expect(livenessFrom({ live: new Set([remote]) }, THIS)(remote)).toBe(true);
    expect(livenessFrom({ live: new Set() }, THIS)(remote)).toBe(false);
    expect(livenessFrom(null, THIS)(remote)).toBe(true);
    // The same PID as this process, on another machine: its PID says nothing.
    expect(livenessFrom({ live: new Set() }, THIS)(processTag(process.pid, OTHER))).toBe(false);
  });
});

describe('the lease keeper', () => {
  it('a store that answers the renewal and then goes down is logged, never a rejection', async () => {
    const logs: string[] = [];
    const store: LeaseStore = {
      renew: async () => ({ live: new Set(), left: new Map() }),
      snapshot: async () => ({ live: new Set(), left: new Map() }),
      release: async () => {},
    };
    const keeper = new LeaseKeeper(
      store,
      processTag(process.pid, THIS),
      THIS,
      {
        peek: () => Promise.reject(new Error('server restarting')),
        sweep: async () => {},
        log: (line) => logs.push(line),
      },
      60_000,
    );
    await expect(keeper.start()).resolves.toBeUndefined();
    await expect(keeper.check()).resolves.toBeUndefined();
    expect(logs).toEqual(['lease check failed: server restarting', 'lease check failed: server restarting']);
    await keeper.close();
  });
});
