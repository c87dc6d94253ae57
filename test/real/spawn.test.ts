// spawn_push with the real CLIs (FEATURES.md §8.4): a session made by an earlier real run is resumed
// by OpenComms itself — `claude --resume <session> --print <batch>` and `codex exec resume <thread>
// <batch>` — when a peer sends through MCP. The spawning process is the peer's own `opencomms mcp`;
// its OPENCOMMS_*_BIN template runs the client offline (test/real/fixtures/netns-wrap.mjs). The
// fake model must receive the framed batch inside the resumed conversation.
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { REAL_DIR, bin, codexArgs, configureClaude, configureCodex, describeRun, jsonLines, namespaced, run, type Sandbox } from './env.ts';
import { startFakeAnthropic, startFakeResponses } from './fake/index.ts';
import type { FakeServer, ModelRequest } from './fake/index.ts';
import { frameIds, opencomms, startPeer, until } from './claude-harness.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';

const { defer, sandbox } = useCleanups();
const pin = () => `sess_${randomBytes(12).toString('hex')}`;
const WRAP = join(REAL_DIR, 'fixtures', 'netns-wrap.mjs');

/** A peer whose `opencomms mcp` spawns `client` offline through the given template variable. */
async function spawningPeer(sb: Sandbox, fake: FakeServer, client: string, clientEnv: Record<string, string>, binVar: string, pinId: string) {
  const ns = defer(await namespaced(client, [], { forward: [fake.port] }), (n) => n.close());
  return defer(await startPeer(sb, pinId, 'team', { ...clientEnv, [binVar]: `"${process.execPath}" "${WRAP}"`, OC_NETNS_ARGV: JSON.stringify(ns.argv) }), (p) => p.close());
}

async function spawnMember(sb: Sandbox, peer: Awaited<ReturnType<typeof startPeer>>, member: string, host: string, session: string) {
  expect((await peer.call('opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'You lead.' })).ok).toBe(true);
  const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
  // As `opencomms mcp --host <host>` makes a member that asked for spawn_push.
  const joined = await rt.run({ op: 'join', caller: { session_id: member, host, surface: 'mcp', delivery_mode: 'spawn_push', host_session_id: null, project_id: 'local-project', worktree: sb.proj }, args: { channel: 'team', role: 'Worker', role_prompt: 'You work.' } });
  expect(joined.ok, joined.message).toBe(true);
  await opencomms(sb, 'install-member', '--host', host, '--id', member);
  await opencomms(sb, 'bind', '--host', host, '--session', session, '--id', member);
  return rt;
}

const batchIn = (r: ModelRequest, id: string) => r.userTexts.some((t) => frameIds(t).includes(id));

describe('spawn_push resumes sessions of earlier real runs', () => {
  it('claude --resume <session> --print <batch>: the fake receives the framed batch in the resumed conversation', async () => {
    const sb = sandbox('oc-spawn-claude');
    const fake = defer(await startFakeAnthropic(['SAY first run', 'SAY resumed run']), (f) => f.close());
    const env = configureClaude(sb, fake);
    const first = await run(bin('claude'), ['-p', 'EARLIER-RUN hello', '--output-format', 'stream-json', '--verbose', '--model', 'claude-sonnet-4-5', '--max-turns', '2'], { cwd: sb.proj, env, timeoutMs: 60_000, forward: [fake.port] });
    expect(first.code, describeRun(first)).toBe(0);
    const session = jsonLines(first.stdout).find((l) => l.type === 'system')?.session_id as string;
    expect(session).toMatch(/^[0-9a-f-]{36}$/);
    const WORKER = pin();
    const peer = await spawningPeer(sb, fake, bin('claude'), env, 'OPENCOMMS_CLAUDE_BIN', pin());
    const rt = await spawnMember(sb, peer, WORKER, 'claude-code', session);
    const { id, at } = await peer.send('resume and review this');
    const req = await until('the resumed claude asks the model with the batch', () => fake.turns().find((r) => batchIn(r, id)), 60_000, () => peer.stderr.join(''));
    expect(req.userTexts.some((t) => t.includes('EARLIER-RUN hello')), 'the earlier conversation is resumed').toBe(true);
    expect(req.userTexts.find((t) => frameIds(t).includes(id))).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nresume and review this\n<<<END_UNTRUSTED_PEER_MESSAGE>>>');
    await until('committed as spawn_push', async () => {
      const logged = await rt.store.history((await rt.read()).channels.team!.id, 20);
      return logged.find((e) => e.message_id === id && e.delivery_status === 'delivered' && e.delivery_method === 'spawn_push');
    }, 60_000);
    console.log(`[spawn] claude: send → model request ${req.at - at} ms`);
  }, 150_000);

  it('codex exec resume <thread> <batch>: the fake receives the framed batch in the resumed thread', async () => {
    const sb = sandbox('oc-spawn-codex');
    const fake = defer(await startFakeResponses(['SAY first run', 'SAY resumed run']), (f) => f.close());
    const env = configureCodex(sb, fake);
    // `codex exec resume` (no --skip-git-repo-check) runs in a git repository, like a real project.
    expect(spawnSync('git', ['init', '-q'], { cwd: sb.proj }).status).toBe(0);
    const first = await run(bin('codex'), codexArgs('EARLIER-RUN hello'), { cwd: sb.proj, env, timeoutMs: 60_000, forward: [fake.port] });
    expect(first.code, describeRun(first)).toBe(0);
    const thread = jsonLines(first.stdout).find((l) => l.type === 'thread.started')?.thread_id as string;
    expect(thread).toBeTruthy();
    const WORKER = pin();
    const peer = await spawningPeer(sb, fake, bin('codex'), env, 'OPENCOMMS_CODEX_BIN', pin());
    const rt = await spawnMember(sb, peer, WORKER, 'codex', thread);
    const { id, at } = await peer.send('codex, resume and build');
    const req = await until('the resumed codex asks the model with the batch', () => fake.turns().find((r) => batchIn(r, id)), 60_000, () => peer.stderr.join(''));
    expect(req.userTexts.some((t) => t.includes('EARLIER-RUN hello')), 'the earlier thread is resumed').toBe(true);
    await until('committed as spawn_push', async () => {
      const logged = await rt.store.history((await rt.read()).channels.team!.id, 20);
      return logged.find((e) => e.message_id === id && e.delivery_status === 'delivered' && e.delivery_method === 'spawn_push');
    }, 60_000);
    console.log(`[spawn] codex: send → model request ${req.at - at} ms`);
  }, 150_000);
});
