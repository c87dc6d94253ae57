// `opencomms channel …` and `join-command` (FEATURES.md §9, §5.10, §10.4) on an empty, a live and
// a broken project. CON-1 (create → a working join command per host) and CON-3 (save → restore as
// new → delete) from the CLI side.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JOIN_HOSTS } from '../../adapters/join-commands.ts';
import { parseSlash, toToolCall } from '../../adapters/opencode/slash.ts';
import { cli, incompatibleState, liveProject, staleLock } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-cli-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));
const day = new Date().toISOString().slice(0, 10);

describe('channel list and get', () => {
  it('empty: a notice; live: live and archived lines; get shows a roster or an archive', async () => {
    expect(await cli('channel', 'list', '--project', dir)).toMatchObject({
      code: 0,
      out: 'No channels yet. Create one with `opencomms channel create <name>`.\n',
    });
    await liveProject(dir);
    const list = await cli('channel', 'list', '--project', dir);
    expect(list.code).toBe(0);
    expect(list.out).toBe(
      `empty [active] 0/4 agents — No description yet\nteam [active] 3/8 agents — Reviewing the parser\nold [saved ${day}] 0 messages — No description yet\n`,
    );
    const j = (await cli('channel', 'list', '--json', '--project', dir)).json();
    expect(j.data.archived).toMatchObject([{ name: 'old', message_count: 0 }]);

    const get = await cli('channel', 'get', 'team', '--project', dir);
    expect(get.out).toBe(
      'team [active] 3/8 agents — Reviewing the parser\n' +
        'sess_aaaaaaaaaaaaaaaaaaaaaaaa | Lead | claude-code | pull\n' +
        'sess_bbbbbbbbbbbbbbbbbbbbbbbb | Reviewer | claude-code | pull\n' +
        'sess_cccccccccccccccccccccccc | Spawner | claude-code | spawn_push\n',
    );
    const old = await cli('channel', 'get', 'old', '--project', dir);
    expect(old.code).toBe(0);
    expect(old.out).toMatch(
      /^old \[saved \d{4}-\d\d-\d\d\] 0 messages — No description yet\narchive: chn_[0-9a-f]{32}\nroles: \(none\)\nsummary: An old session\.\nrestore it with: opencomms channel restore old\n$/,
    );
    const missing = await cli('channel', 'get', 'nope', '--project', dir, '--json');
    expect(missing.code).toBe(1);
    expect(missing.json()).toMatchObject({ ok: false, data: { reason: 'channel_not_found' } });
  });

  it('broken: an incompatible state refuses every session command and join-command with exit 1', async () => {
    await incompatibleState(dir);
    for (const argv of [
      ['channel', 'list'],
      ['channel', 'get', 'x'],
      ['channel', 'create', 'x'],
      ['channel', 'save', 'x'],
      ['channel', 'delete', 'x', '--confirm'],
      ['channel', 'restore', 'x'],
      ['join-command', 'x'],
    ]) {
      const r = await cli(...argv, '--project', dir);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.err).toContain('schema_version 3');
    }
  });
});

describe('CON-1 channel create and join-command', () => {
  it('creates an empty active channel with the CLI sentinel project; refusals exit 1', async () => {
    const r = await cli('channel', 'create', 'Review', '--max-members', '3', '--project', dir);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toContain('Created empty channel "review" (0/3 agents)');
    const { openRuntime } = await import('../../src/runtime/runtime.ts');
    const rt = openRuntime(dir);
    const ch = (await rt.read()).channels.review!;
    await rt.close();
    expect(ch).toMatchObject({ members: [], lifecycle: 'active', project_id: 'cli-local-project', max_members: 3 });
    expect((await cli('channel', 'create', 'review', '--project', dir, '--json')).json()).toMatchObject({
      ok: false,
      data: { reason: 'channel_exists' },
    });
    expect((await cli('channel', 'create', 'Bad Name', '--project', dir)).code).toBe(1);
    expect((await cli('channel', 'create', 'x', '--max-members', 'lots', '--project', dir)).code).toBe(1);
  });

  it('works under a stale lock (the lock is broken, not waited on forever)', async () => {
    await staleLock(dir);
    expect((await cli('channel', 'create', 'x', '--project', dir)).code).toBe(0);
  });

  it('prints a join command per host, one source with the console (§10.4)', async () => {
    await cli('channel', 'create', 'review', '--project', dir);
    const oc = await cli('join-command', 'review', '--project', dir);
    expect(oc).toMatchObject({
      code: 0,
      out: 'Run in the OpenCode session (type it):\n    /OpenComms Join Channel=review As=<role> [role instructions]\n',
    });
    // The OpenCode line parses as a join of that channel by the slash grammar.
    expect(
      toToolCall(
        parseSlash(
          oc.out
            .split('\n')[1]!
            .trim()
            .replace(/^\/OpenComms /, ''),
        ),
      ),
    ).toMatchObject({ tool: 'opencomms_join', args: { channel: 'review', role: '<role>' } });
    const cc = await cli('join', 'review', '--host', 'claude-code', '--role', 'Reviewer', '--project', dir);
    expect(cc.out).toBe(
      'Run in the Claude Code session (ask the agent):\n    opencomms_join(channel="review", role="Reviewer", role_prompt="...", spawn_push=true)\n',
    );
    const desk = (await cli('join-command', 'review', '--host', 'claude-desktop', '--json', '--project', dir)).json();
    expect(desk).toMatchObject({
      ok: true,
      data: {
        session: 'review',
        host: 'claude-desktop',
        command: 'opencomms_join(channel="review", role="<role>", role_prompt="...")',
      },
    });
    for (const host of JOIN_HOSTS)
      expect((await cli('join-command', 'review', '--host', host, '--project', dir)).code).toBe(0);
  });

  it('refuses an unknown host, a missing session (empty project too) and a saved one', async () => {
    expect((await cli('join-command', 'team', '--project', dir)).code).toBe(1);
    await liveProject(dir);
    const host = await cli('join-command', 'team', '--host', 'gemini', '--project', dir);
    expect(host.code).toBe(1);
    expect(host.err).toContain(
      'Unknown host "gemini". Use one of: opencode, claude-code, codex, claude-desktop, chatgpt.',
    );
    expect((await cli('join-command', 'nope', '--project', dir, '--json')).json()).toMatchObject({
      ok: false,
      data: { reason: 'channel_not_found' },
    });
    expect((await cli('join-command', 'old', '--project', dir, '--json')).json()).toMatchObject({
      ok: false,
      data: { reason: 'lifecycle_refused' },
    });
  });
});

describe('CON-3 save → restore as new → delete', () => {
  it('saves with a summary, restores under a new name, deletes with --confirm only', async () => {
    await liveProject(dir);
    const save = await cli('channel', 'save', 'team', '--summary', 'Parser reviewed.', '--project', dir);
    expect(save).toMatchObject({
      code: 0,
      out: 'Saved "team": 1 message(s) archived.\nRestore it with: opencomms channel restore team\n',
    });
    expect((await cli('channel', 'save', 'team', '--project', dir, '--json')).json()).toMatchObject({
      ok: false,
      data: { reason: 'lifecycle_refused' },
    });

    const restored = await cli('channel', 'restore', 'team', '--project', dir);
    expect(restored.out).toBe(
      'Restored "team" as new channel "team".\nJoin commands: opencomms join-command team --host <host>\n',
    );
    const again = await cli('channel', 'restore', 'team', '--as', 'team-b', '--project', dir, '--json');
    expect(again.json()).toMatchObject({ ok: true, data: { name: 'team-b', members: [] } });
    const get = (await cli('channel', 'get', 'team-b', '--json', '--project', dir)).json();
    expect(get.data.compact_context).toContain('Parser reviewed.');

    const noConfirm = await cli('channel', 'delete', 'team-b', '--project', dir);
    expect(noConfirm).toMatchObject({ code: 1, out: '' });
    expect(noConfirm.err).toContain('--confirm');
    expect((await cli('channel', 'delete', 'team-b', '--confirm', '--project', dir)).out).toBe(
      'Deleted "team-b"; its mail was discarded.\n',
    );
    // A saved channel's name resolves to its archive.
    expect((await cli('channel', 'delete', 'old', '--confirm', '--project', dir)).out).toBe(
      'Deleted the archive of "old".\n',
    );
    // One archive file left (the heads index, `.index.json`, is a cache beside them).
    expect((await readdir(join(dir, '.opencomms', 'archives'))).filter((n) => n.startsWith('chn_'))).toHaveLength(1);
    expect((await cli('channel', 'delete', 'nothing', '--confirm', '--project', dir)).code).toBe(1);
  });
});
