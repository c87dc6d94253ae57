// `opencomms usage`, `release`, `channel budget`, and the hold and cost `status` and `members` show
// (operator.md "Wakes and their cost"): the report of each channel's cost ledger and wake lines, the
// operator's release of held wakes and the channel's wake budgets, as text and as one --json document.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { USAGE_BUCKET_MS, WAKE_BUDGET_WINDOW_MS } from '../../src/protocol/limits.ts';
import { type State, WakeLineSchema } from '../../src/protocol/schema.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { cli, IDS, liveProject } from './fixtures.ts';

let dir: string;
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-cli-'))));
afterEach(() => rm(dir, { recursive: true, force: true }));

const counters = (wakes: number, messages: number, size: number, held = 0) => ({
  wakes,
  routes: (wakes ? { 'claude-code/push': wakes } : {}) as Record<string, number>,
  held,
  messages,
  size,
});

/** The live project, with what the wake guard records on "team": the Reviewer woken three times in
 *  the last hour and then held by the loop guard, the Lead's pulls. */
async function costlyProject(now = Date.now()) {
  await liveProject(dir);
  const bucket = String(now - (now % USAGE_BUCKET_MS));
  const heldSince = now - 90_000;
  const rt = openRuntime(dir, { log: () => {} });
  try {
    await rt.store.mutate((draft: State) => {
      const team = draft.channels.team!;
      team.usage = {
        [IDS.reviewer]: { total: counters(5, 9, 4_001, 2), buckets: { [bucket]: counters(3, 6, 2_001, 1) } },
        [IDS.lead]: {
          total: { ...counters(0, 2, 80), routes: { pull: 2 } },
          buckets: { [bucket]: { ...counters(0, 2, 80), routes: { pull: 2 } } },
        },
      };
      team.wakes = {
        [IDS.reviewer]: WakeLineSchema.parse({
          at: now - 120_000,
          chain: 6,
          base: 0,
          starts: [now - WAKE_BUDGET_WINDOW_MS - 5, now - 600_000, now - 300_000, now - 120_000],
          held_by: 'loop',
          held_since: heldSince,
          held_newest: heldSince,
        }),
      };
      team.holds[IDS.reviewer] = 'loop';
      return { changed: true, result: null };
    });
  } finally {
    await rt.close();
  }
  return { heldSince };
}

const utc = (ms: number) => `${new Date(ms).toISOString().slice(11, 19)} UTC`;

describe('opencomms usage', () => {
  it('per channel and member: the last hour, the last day and the total, with the token estimate labelled', async () => {
    const { heldSince } = await costlyProject();
    const r = await cli('usage', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.err).toBe('');
    expect(r.out).toMatch(/^Windows: last hour \(since \d{4}-\d\d-\d\d \d\d:\d0 UTC\), last day \(since /);
    expect(r.out).toContain('Tokens are an estimate: ceil(size / 4) of the characters shown to the model.');
    expect(r.out).toContain('team: wake budget 3/240 wakes in the last hour (channel)');
    expect(r.out).toContain(
      `  Reviewer: wakes held by the loop guard since ${utc(heldSince)} (1 pending); wake budget 3/60 wakes in the last hour\n` +
        '    last hour  3 wakes (claude-code/push 3), 1 held, 6 messages, 2,001 characters, ~501 tokens (estimate)\n' +
        '    last day   3 wakes (claude-code/push 3), 1 held, 6 messages, 2,001 characters, ~501 tokens (estimate)\n' +
        '    total      5 wakes (claude-code/push 5), 2 held, 9 messages, 4,001 characters, ~1,001 tokens (estimate)\n',
    );
    expect(r.out).toContain(
      '  Lead: wakes go; wake budget 0/60 wakes in the last hour\n' +
        '    last hour  0 wakes, 2 reads (pull), 0 held, 2 messages, 80 characters, ~20 tokens (estimate)\n',
    );
    // The channel's lines are its members' sums.
    expect(r.out).toContain(
      '    total      5 wakes (claude-code/push 5), 2 reads (pull), 2 held, 11 messages, 4,081 characters, ~1,021 tokens (estimate)\n',
    );
    expect(r.out).toContain('empty: wake budget 0/240 wakes in the last hour (channel)');
  });

  it('--channel names one live channel; --json is one document; an unknown or saved channel is refused', async () => {
    const { heldSince } = await costlyProject();
    const j = (await cli('usage', '--channel', 'TEAM', '--json', '--project', dir)).json();
    expect(j).toMatchObject({
      ok: true,
      message: 'Usage of "team".',
      data: { bucket_ms: USAGE_BUCKET_MS, token_estimate: { rule: 'ceil(size / 4)', chars_per_token: 4 } },
    });
    expect(j.data.channels.map((c: { name: string }) => c.name)).toEqual(['team']);
    const rev = j.data.channels[0].members.find((m: { role: string }) => m.role === 'Reviewer');
    expect(rev).toMatchObject({
      session_id: IDS.reviewer,
      hold: { held_by: 'loop', held_since: heldSince, pending: 1 },
      wake_budget: { used: 3, budget: 60, next_free_at: null },
      usage: { hour: { wakes: 3, held: 1, tokens_estimate: 501 }, total: { wakes: 5, size: 4_001 } },
    });
    const missing = await cli('usage', '--channel', 'nope', '--project', dir);
    expect(missing).toMatchObject({ code: 1, out: '' });
    expect(missing.err).toMatch(/^opencomms: No channel "nope"/);
    expect((await cli('usage', '--channel', 'old', '--json', '--project', dir)).json()).toMatchObject({
      ok: false,
      data: { reason: 'lifecycle_refused' },
    });
  });

  it('an empty project: the windows and no channels, nothing written', async () => {
    const r = await cli('usage', '--project', dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/No live channels in this project\.\n$/);
  });
});

describe('status and members show each member’s hold and cost', () => {
  it('a line under a member that is held or cost anything; none under one that did not', async () => {
    const { heldSince } = await costlyProject();
    const s = await cli('status', '--project', dir);
    expect(s.code).toBe(0);
    expect(s.out).toMatch(
      new RegExp(
        `  Reviewer \\(claude-code, delivery: pull, [^\\n]+\\)\\n    wakes held by the loop guard since ${utc(heldSince)} \\(1 pending\\); last hour: 3 wakes \\(claude-code/push 3\\), 1 held, 6 messages, 2,001 characters, ~501 tokens \\(estimate\\); wake budget 3/60 wakes in the last hour\\n`,
      ),
    );
    expect(s.out).toMatch(/ {2}Spawner \([^\n]+\)\nempty\n/);
    const sj = (await cli('status', '--json', '--project', dir)).json();
    const team = sj.data.channels.find((c: { name: string }) => c.name === 'team');
    expect(team.members.find((m: { role: string }) => m.role === 'Reviewer')).toMatchObject({
      hold: { held_by: 'loop', pending: 1 },
      wake_budget: { used: 3, budget: 60 },
      usage: { hour: { wakes: 3 } },
    });

    const m = await cli('members', 'team', '--project', dir);
    expect(m.code).toBe(0);
    // From the sessions index (no pending counts) or a look at the whole state (with them).
    expect(m.out).toMatch(
      new RegExp(
        `lease=n/a\\n  wakes held by the loop guard since ${utc(heldSince)}( \\(1 pending\\))?; last hour: 3 wakes \\(claude-code/push 3\\), 1 held, 6 messages, 2,001 characters, ~501 tokens \\(estimate\\); wake budget 3/60 wakes in the last hour\\nSpawner: [^\\n]+\\n$`,
      ),
    );
    expect(m.out).toMatch(/^Lead: [^\n]+\n {2}last hour: 0 wakes, 2 reads \(pull\), 0 held, 2 messages, 80 characters/);
    const mj = (await cli('members', 'team', '--json', '--project', dir)).json();
    expect(mj.data.agents.find((a: { role: string }) => a.role === 'Lead')).toMatchObject({
      hold: { held_by: null },
      usage: { total: { messages: 2, routes: { pull: 2 } } },
    });
  });
});

describe('opencomms release', () => {
  it('releases the held wakes of a channel, or of one member; says so when none is held', async () => {
    await costlyProject();
    expect((await cli('release', 'team', '--member', 'lead', '--project', dir)).out).toBe(
      'No wake is held on "team" for Lead.\n',
    );
    const one = (await cli('release', 'team', '--member', 'Reviewer', '--json', '--project', dir)).json();
    expect(one).toMatchObject({
      ok: true,
      message: 'Released the wakes of Reviewer on "team": their held mail starts a turn now.',
      data: { released: [IDS.reviewer], roles: ['Reviewer'] },
    });
    expect((await cli('release', 'empty', '--project', dir)).out).toBe('No wake is held on "empty".\n');
  });

  it('refusals: an unknown member, an unknown or saved channel; exit 1 with a stable reason', async () => {
    await costlyProject();
    expect((await cli('release', 'team', '--member', 'Nobody', '--json', '--project', dir)).json()).toMatchObject({
      ok: false,
      data: { reason: 'target_not_found' },
    });
    const missing = await cli('release', 'nope', '--project', dir);
    expect(missing).toMatchObject({ code: 1, out: '' });
    expect(missing.err).toMatch(/^opencomms: [^\n]*"nope"/);
    expect((await cli('release', 'old', '--json', '--project', dir)).json()).toMatchObject({
      ok: false,
      data: { reason: 'lifecycle_refused' },
    });
  });
});

describe('opencomms channel budget', () => {
  it('sets the wake budgets (a number or none), and without an option shows them and their use', async () => {
    await costlyProject();
    expect(
      await cli(
        'channel',
        'budget',
        'team',
        '--wakes-per-member',
        '5',
        '--wakes-per-channel',
        'none',
        '--project',
        dir,
      ),
    ).toMatchObject({ code: 0, out: 'Wake budgets of "team": 5 per member, none per channel, per hour.\n' });
    const shown = await cli('channel', 'budget', 'team', '--project', dir);
    expect(shown).toMatchObject({ code: 0, err: '' });
    expect(shown.out).toBe(
      'team: wake budget none (channel)\n' +
        '  Lead: wake budget 0/5 wakes in the last hour\n' +
        '  Reviewer: wake budget 3/5 wakes in the last hour\n' +
        '  Spawner: wake budget 0/5 wakes in the last hour\n',
    );
    const j = (await cli('channel', 'budget', 'team', '--wakes-per-member', 'NONE', '--json', '--project', dir)).json();
    expect(j).toMatchObject({
      ok: true,
      data: { budgets: { max_wakes_per_member: null, max_wakes_per_channel: null } },
    });
    expect((await cli('channel', 'budget', 'team', '--wakes-per-member', '3', '--project', dir)).code).toBe(0);
    expect((await cli('channel', 'budget', 'team', '--project', dir)).out).toContain(
      'Reviewer: wake budget 3/3 wakes in the last hour, spent until',
    );
  });

  it('a budget that is not a whole number or none is invalid_argument; an unknown channel is refused', async () => {
    await costlyProject();
    const bad = await cli('channel', 'budget', 'team', '--wakes-per-member', 'lots', '--project', dir);
    expect(bad).toMatchObject({ code: 1, out: '' });
    expect(bad.err).toBe(
      'opencomms: --wakes-per-member takes a whole number of wakes per hour, or "none": "lots" is neither.\n',
    );
    expect(
      (await cli('channel', 'budget', 'team', '--wakes-per-channel', '-1', '--json', '--project', dir)).json(),
    ).toMatchObject({ ok: false, data: { reason: 'invalid_argument' } });
    expect(
      (await cli('channel', 'budget', 'nope', '--wakes-per-member', '4', '--json', '--project', dir)).json(),
    ).toMatchObject({ ok: false, data: { reason: 'channel_not_found' } });
  });
});
