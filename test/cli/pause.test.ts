// `opencomms pause <channel>` / `resume <channel>`: the operator holds and releases a channel through
// the same engine operation (channel machine, refusals) as the members' opencomms_pause/_resume.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { cli, IDS, liveProject } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-cli-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('pause and resume a channel from the CLI', () => {
  it('pause holds the channel (sends refused, mail kept); resume releases it; each answers once changed', async () => {
    await liveProject(dir);
    expect(await cli('pause', 'team', '--project', dir)).toMatchObject({
      code: 0,
      out: 'Paused "team": delivery is held.\n',
    });
    expect((await cli('channels', '--project', dir)).out).toContain('team [paused]');
    expect(await cli('pause', 'team', '--project', dir)).toMatchObject({
      code: 0,
      out: '"team" was already paused.\n',
    });
    const rt = openRuntime(dir, { log: () => {} });
    try {
      const refused = await rt.run({
        op: 'send',
        sid: IDS.reviewer,
        args: { channel: 'team', content: 'while paused', to: 'Lead' },
      });
      expect(refused).toMatchObject({ ok: false, data: { reason: 'channel_paused' } });
      // A held channel keeps its queued mail: a member's read takes nothing.
      const pulled = await rt.run({ op: 'pull', sid: IDS.reviewer, args: {} });
      expect(pulled.data).toMatchObject({ message_ids: [], remaining: 1 });
      const j = (await cli('resume', 'team', '--json', '--project', dir)).json();
      expect(j).toMatchObject({
        ok: true,
        message: 'Resumed "team": held mail is delivered.',
        data: { paused: false, changed: true },
      });
      expect((await rt.run({ op: 'pull', sid: IDS.reviewer, args: {} })).data).toMatchObject({ remaining: 0 });
      expect((await rt.run({ op: 'pull', sid: IDS.reviewer, args: {} })).ok).toBe(true);
    } finally {
      await rt.close();
    }
    expect(await cli('resume', 'team', '--project', dir)).toMatchObject({ code: 0, out: '"team" was not paused.\n' });
  });

  it('refusals: an unknown channel, a saved one, a malformed name; exit 1 with a stable reason', async () => {
    await liveProject(dir);
    const missing = await cli('pause', 'nope', '--project', dir);
    expect(missing).toMatchObject({ code: 1, out: '' });
    expect(missing.err).toBe(
      'opencomms: No channel "nope" in this project; `opencomms channels` lists the live ones.\n',
    );
    expect((await cli('resume', 'old', '--json', '--project', dir)).json()).toMatchObject({
      ok: false,
      data: { reason: 'lifecycle_refused', lifecycle: 'saved' },
    });
    expect((await cli('pause', '???', '--json', '--project', dir)).json()).toMatchObject({
      ok: false,
      data: { reason: 'invalid_channel_name' },
    });
  });
});
