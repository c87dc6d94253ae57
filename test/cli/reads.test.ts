// status, channels and members (FEATURES.md §9) on an empty, a live and a broken project: output,
// `--json` as one {ok, message, data} document, and exit codes.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { machineId } from '../../src/runtime/machine.ts';
import { VERSION } from '../../src/version.ts';
import { cli, corruptState, incompatibleState, liveProject, staleLock } from './fixtures.ts';

/** How a member of this machine on the file store (no leases) shows in status and members. */
const HERE = machineId().slice(0, 8);
const here = { machine: machineId(), machine_name: null, this_machine: true, process: null, lease: 'n/a' };

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-cli-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('status', () => {
  it('empty project: header and zero counts, writes nothing', async () => {
    const r = await cli('status', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out).toBe(
      `OpenComms ${VERSION} - project ${dir}\nState schema: v2 at .opencomms/state.json\n0 channel(s), 0 message(s), 0 pending\nThis computer: ${HERE}\n`,
    );
    expect(await readdir(dir)).toEqual([]);
    // The file store keeps no leases: no process list (null), only this machine's id.
    expect((await cli('status', '--json', '--project', dir)).json()).toEqual({
      ok: true,
      message: '0 channel(s), 0 pending.',
      data: {
        channels: [],
        total_messages: 0,
        pending_messages: 0,
        errors: [],
        machine: machineId(),
        processes: null,
      },
    });
  });

  it('live project: channels with members, modes and stale marks', async () => {
    await liveProject(dir);
    const r = await cli('status', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out).toContain('2 channel(s), 1 message(s), 1 pending');
    const at = `computer ${HERE}, this computer, lease n/a`;
    expect(r.out).toContain(
      `team\n  Lead (claude-code, delivery: pull, ${at})\n  Reviewer (claude-code, delivery: pull, ${at})\n  Spawner (claude-code, delivery: spawn_push, ${at})\nempty\n`,
    );
    const j = (await cli('status', '--project', dir, '--json')).json();
    expect(j.data.channels.map((c: { name: string }) => c.name).sort()).toEqual(['empty', 'team']);
    const team = j.data.channels.find((c: { name: string }) => c.name === 'team');
    for (const m of team.members) expect(m).toMatchObject(here);
  });

  it('broken project: a corrupt file is recovered on read and the error shows; an incompatible one exits 1', async () => {
    await corruptState(dir);
    const r = await cli('status', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/\nerror: state\.json was corrupt \(not valid JSON/);
    expect((await cli('status', '--json', '--project', dir)).json().data.errors[0].message).toMatch(
      /preserved as state\.corrupt\.\d+\.json/,
    );
    await rm(join(dir, '.opencomms'), { recursive: true });
    await incompatibleState(dir);
    const bad = await cli('status', '--project', dir);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('schema_version 3');
    expect((await cli('status', '--json', '--project', dir)).json()).toMatchObject({
      ok: false,
      data: { reason: 'state_incompatible' },
    });
  });

  it('a stale lock does not block a read', async () => {
    await liveProject(dir);
    await staleLock(dir);
    expect((await cli('status', '--project', dir)).code).toBe(0);
  });
});

describe('channels', () => {
  it('empty: a one-line notice; live: one line per live channel; broken: exit 1', async () => {
    const empty = await cli('channels', '--project', dir);
    expect(empty).toMatchObject({
      code: 0,
      out: 'No live channels in this project. Create one with `opencomms channel create <name>`.\n',
    });
    await liveProject(dir);
    const live = await cli('channels', '--project', dir);
    expect(live).toMatchObject({ code: 0, out: 'empty (0 members)\nteam (3 members)\n' });
    await cli('--project', dir, 'channel', 'create', 'x');
    const j = (await cli('channels', '--json', '--project', dir)).json();
    expect(j.ok).toBe(true);
    expect(j.data.live.map((c: { name: string }) => c.name)).toEqual(['empty', 'team', 'x']);
    await rm(join(dir, '.opencomms'), { recursive: true });
    await incompatibleState(dir);
    expect((await cli('channels', '--project', dir)).code).toBe(1);
  });

  it('marks a paused channel', async () => {
    await liveProject(dir);
    const { openRuntime } = await import('../../src/runtime/runtime.ts');
    const rt = openRuntime(dir);
    await rt.run({ op: 'pause', sid: 'sess_aaaaaaaaaaaaaaaaaaaaaaaa', args: { channel: 'team' } });
    await rt.close();
    expect((await cli('channels', '--project', dir)).out).toContain('team [paused] (3 members)');
  });
});

describe('members', () => {
  it('lists a live roster; an unknown or saved channel exits 1', async () => {
    await liveProject(dir);
    const r = await cli('members', 'TEAM', '--project', dir);
    expect(r).toMatchObject({
      code: 0,
      out: `Lead: host=claude-code surface=mcp delivery=pull computer=${HERE}(this) lease=n/a\nReviewer: host=claude-code surface=mcp delivery=pull computer=${HERE}(this) lease=n/a\nSpawner: host=claude-code surface=mcp delivery=spawn_push computer=${HERE}(this) lease=n/a\n`,
    });
    expect((await cli('members', 'empty', '--project', dir)).out).toBe('"empty" has no members yet.\n');
    const missing = await cli('members', 'nope', '--project', dir);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('No channel "nope"');
    const saved = await cli('members', 'old', '--project', dir, '--json');
    expect(saved.code).toBe(1);
    expect(saved.json()).toMatchObject({ ok: false, data: { reason: 'lifecycle_refused' } });
    const j = (await cli('members', 'team', '--json', '--project', dir)).json();
    expect(j.data.agents.map((a: { role: string; state: string }) => `${a.role}:${a.state}`)).toEqual([
      'Lead:Idle',
      'Reviewer:Working',
      'Spawner:Idle',
    ]);
    expect(j.data.machine).toBe(machineId());
    for (const a of j.data.agents) expect(a).toMatchObject(here);
  });

  it('marks stale members and refuses on an empty project', async () => {
    expect((await cli('members', 'team', '--project', dir)).code).toBe(1);
    await liveProject(dir);
    const { openRuntime } = await import('../../src/runtime/runtime.ts');
    const rt = openRuntime(dir);
    await rt.run({ op: 'mark_stale', session: 'sess_bbbbbbbbbbbbbbbbbbbbbbbb' });
    await rt.close();
    expect((await cli('members', 'team', '--project', dir)).out).toContain(
      `Reviewer: host=claude-code surface=mcp delivery=pull computer=${HERE}(this) lease=n/a [STALE]`,
    );
  });
});
