// Two interactive Claude Code 2.1.332 sessions (tmux) in one project, two members: each session is
// started with its own OPENCOMMS_MEMBER_ID, joins as that member through its own MCP server, and is
// woken only by its own mail. The project's `.mcp.json` names the member as
// `${OPENCOMMS_MEMBER_ID}` (Claude Code expands it from the session's environment): the test writes
// that value itself, so what it shows does not depend on what the installer writes there.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { bin, configureClaude, trustClaudeProject } from './env.ts';
import { startFakeAnthropic } from './fake/index.ts';
import { acknowledge, framesRead, leadTeam, opencomms, startPeer, until } from './claude-harness.ts';
import { startTerminal } from './tmux.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;

describe('Claude Code 2.1.332, interactive: two sessions, two members', () => {
  it('each session runs as its own member and is woken only by its own mail', async () => {
    const sb = sandbox('oc-two');
    const A = pin(),
      B = pin();
    await opencomms(sb, 'install', 'claude-code');
    await opencomms(sb, 'install-member', '--id', A);
    await opencomms(sb, 'install-member', '--id', B);
    const mcpPath = join(sb.proj, '.mcp.json');
    const mcp = JSON.parse(readFileSync(mcpPath, 'utf8'));
    mcp.mcpServers.opencomms.env.OPENCOMMS_MEMBER_ID = '${OPENCOMMS_MEMBER_ID}';
    writeFileSync(mcpPath, JSON.stringify(mcp, null, 2));

    const peer = defer(await startPeer(sb, pin(), 'team'), (p) => p.close());
    await leadTeam(peer);
    const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
    const row = async (id: string) => (await rt.read()).channels.team?.members.find((m) => m.session_id === id);

    const sessions = [];
    for (const [member, role] of [
      [A, 'Alpha'],
      [B, 'Beta'],
    ] as const) {
      const fake = defer(
        await startFakeAnthropic(
          Array.from({ length: 30 }, () => acknowledge('team', { role, role_prompt: `You are ${role}.` }, 'Lead')),
        ),
        (f) => f.close(),
      );
      const env = { ...configureClaude(sb, fake), OPENCOMMS_MEMBER_ID: member };
      trustClaudeProject(sb, env, ['opencomms']);
      const term = defer(
        await startTerminal(bin('claude'), ['--model', 'claude-sonnet-4-5'], {
          cwd: sb.proj,
          env,
          timeoutMs: 600_000,
          forward: [fake.port],
        }),
        (t) => t.close(),
      );
      await term.waitScreen(/❯/, 40_000);
      term.type('[join] join the team channel');
      const bound = await until(
        `${role} joined as ${member} and bound`,
        async () => (await row(member))?.host_session_id ?? false,
        40_000,
        () => term.screen(),
      );
      sessions.push({ member, role, fake, term, bound });
      // tmux sockets are named by the millisecond: the next terminal gets its own.
      await new Promise((r) => setTimeout(r, 5));
    }
    const [a, b] = sessions as [(typeof sessions)[0], (typeof sessions)[0]];
    expect(a.bound).not.toBe(b.bound);
    const roles = (await rt.read()).channels.team!.members.map((m) => [m.session_id, m.role]);
    expect(roles).toEqual(
      expect.arrayContaining([
        [A, 'Alpha'],
        [B, 'Beta'],
      ]),
    );

    const to = async (role: string, content: string) => {
      const r = await peer.call('opencomms_send', { channel: 'team', content, to: role });
      expect(r.ok, r.message).toBe(true);
      return { id: r.data.message_ids[0] as string };
    };
    for (const [n, [target, other]] of (
      [
        [a, b],
        [b, a],
        [a, b],
      ] as const
    ).entries()) {
      const { id } = await to(target.role, `mail ${n + 1}, for ${target.role} only`);
      await until(
        `${target.role} is woken with its mail`,
        () => target.fake.turns().find((r) => framesRead(r).includes(id)),
        20_000,
        () => target.term.screen(),
      );
      // The acknowledgement comes from the session's own MCP server, as its own member.
      expect(await peer.pullUntil(new RegExp(`ack ${id}`), 20_000)).toContain(`[OpenComms] from ${target.role} |`);
      expect(
        other.fake.turns().some((r) => framesRead(r).includes(id)),
        `${other.role} never reads ${target.role}'s mail`,
      ).toBe(false);
    }
  }, 300_000);
});
