// Spawn delivery (FEATURES.md §8.4, SPN-1..SPN-7) through the real runtime, store and execFile:
// the CLI is a fake executable (test/helpers/fake-cli.mjs) reached through the same
// OPENCOMMS_CLAUDE_BIN / OPENCOMMS_CODEX_BIN templates a user sets, and it logs the argv it got.
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { SPAWN_CONTRACTS, spawnDriver } from '../../adapters/spawn.ts';
import { spawnEligible } from '../../src/engine/eligibility.ts';
import { capabilitiesFor } from '../../src/protocol/schema.ts';
import type { Member } from '../../src/protocol/schema.ts';
import { SPAWN_ARG_MAX_BYTES } from '../../src/runtime/limits.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { parseTemplate, Spawner, type Exec } from '../../src/runtime/spawn.ts';

const FAKE = join(import.meta.dirname, '..', 'helpers', 'fake-cli.mjs');
let dir: string;
let log: string;
let exitFile: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-spawn '));
  log = join(dir, 'cli.log');
  exitFile = join(dir, 'exit');
  process.env.FAKE_CLI_LOG = log;
  process.env.FAKE_CLI_EXIT_FILE = exitFile;
  delete process.env.FAKE_CLI_MS;
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const calls = (): Array<{ argv: string[]; at: number; member: string | null }> => {
  try {
    return readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
};

/** The template a user would set: the executable, then prepended arguments (here: the script). */
const template = `"${process.execPath}" "${FAKE}" --prepended`;

interface World {
  rt: Runtime;
  send(content: string): Promise<string>;
  msg(id: string): Promise<any>;
  errors(): Promise<string[]>;
}

async function world(
  o: { host?: string; bound?: boolean; env?: Record<string, string>; exec?: Exec } = {},
): Promise<World> {
  const host = o.host ?? 'claude-code';
  const env = { OPENCOMMS_CLAUDE_BIN: template, OPENCOMMS_CODEX_BIN: template, ...o.env };
  const rt = openRuntime(dir, { spawn: spawnDriver(dir, env, o.exec), log: () => {} });
  await rt.start();
  const caller = (sid: string, mode: string, h = 'claude-code') => ({
    session_id: sid,
    host: h,
    surface: 'mcp',
    delivery_mode: mode,
    host_session_id: null,
    project_id: 'local-project',
    worktree: dir,
  });
  await rt.run({
    op: 'create',
    caller: caller('sess_a', 'pull'),
    args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.', rate_limit: 100 },
  });
  await rt.run({
    op: 'join',
    caller: caller('sess_b', 'spawn_push', host),
    args: { channel: 'team', role: 'Worker', role_prompt: 'Work.' },
  });
  if (o.bound !== false)
    expect((await rt.run({ op: 'bind', member: 'sess_b', host, host_session_id: 'session-b' })).ok).toBe(true);
  const history = async () => await rt.store.history((await rt.read()).channels.team!.id, 100);
  return {
    rt,
    async send(content) {
      const r = await rt.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content } });
      expect(r.ok, r.message).toBe(true);
      return (r.data as { message_ids: string[] }).message_ids[0]!;
    },
    async msg(id) {
      return (await rt.read()).messages[id] ?? (await history()).find((e) => e.message_id === id);
    },
    errors: async () => (await rt.read()).errors.map((e) => e.message),
  };
}

const until = async (ok: () => boolean | Promise<boolean>, ms = 10_000) => {
  const end = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
};

describe('SPN-1 endpoint capabilities and the gate', () => {
  const row = (over: Partial<Member> = {}): Member =>
    ({
      delivery_mode: 'spawn_push',
      endpoint_capabilities: capabilitiesFor('spawn_push'),
      host: 'codex',
      host_session_id: 't',
      ...over,
    }) as Member;
  it('derived from the mode, per-member overrides honoured by the gate', () => {
    expect(capabilitiesFor('spawn_push')).toMatchObject({ push: true, pull: true, resume: true });
    expect(capabilitiesFor('pull')).toMatchObject({ push: false, resume: false });
    expect(capabilitiesFor('spawn_push', { resume: false }).resume).toBe(false);
    expect(spawnEligible(row(), ['codex'])).toBe(true);
    expect(
      spawnEligible(row({ endpoint_capabilities: capabilitiesFor('spawn_push', { resume: false }) }), ['codex']),
    ).toBe(false);
    expect(
      spawnEligible(row({ endpoint_capabilities: capabilitiesFor('spawn_push', { push: false }) }), ['codex']),
    ).toBe(false);
  });
});

describe('SPN-2 argv contracts: the framed batch is the last single element, no shell', () => {
  it('claude: --resume <session> --print <batch>; codex: exec resume <thread> <batch>', () => {
    expect(SPAWN_CONTRACTS['claude-code'].args('s1', 'T')).toEqual(['--resume', 's1', '--print', 'T']);
    expect(SPAWN_CONTRACTS.codex.args('t1', 'T')).toEqual(['exec', 'resume', 't1', 'T']);
  });

  for (const host of ['claude-code', 'codex'])
    it(`${host}: shell syntax in peer text reaches the CLI verbatim as one argument`, async () => {
      process.env.OPENCOMMS_MEMBER_ID = 'sess_a'; // as in the spawning member's own MCP server
      onTestFinished(() => void delete process.env.OPENCOMMS_MEMBER_ID);
      const w = await world({ host });
      const evil = `$(touch ${join(dir, 'pwned')}); echo "quoted" \`id\` | cat > ${join(dir, 'pwned2')} & \\ 'x'`;
      await w.send(evil);
      await until(() => calls().length === 1);
      await w.rt.settled();
      const argv = calls()[0]!.argv;
      expect(calls()[0]!.member).toBe('sess_b'); // the recipient, never the spawning process's own id
      expect(argv.slice(0, 1)).toEqual(['--prepended']);
      expect(argv.slice(1, -1)).toEqual(
        host === 'codex' ? ['exec', 'resume', 'session-b'] : ['--resume', 'session-b', '--print'],
      );
      expect(argv.at(-1)).toContain(`<<<UNTRUSTED_PEER_MESSAGE>>>\n${evil}\n<<<END_UNTRUSTED_PEER_MESSAGE>>>`);
      const { existsSync } = await import('node:fs');
      expect(existsSync(join(dir, 'pwned')) || existsSync(join(dir, 'pwned2'))).toBe(false);
      await w.rt.close();
    });
});

describe('SPN-3 the gate: mode, a bound session, a host with a contract', () => {
  it('an unbound spawn_push member is not spawned; its mail waits for pull', async () => {
    const w = await world({ bound: false });
    const id = await w.send('for later');
    await new Promise((r) => setTimeout(r, 300));
    await w.rt.settled();
    expect(calls()).toEqual([]);
    expect((await w.msg(id)).delivery_status).toBe('pending');
    await w.rt.close();
  });

  it('a host without an argv contract is not spawned', async () => {
    const w = await world({ host: 'claude-desktop' });
    await w.send('desk');
    await new Promise((r) => setTimeout(r, 300));
    expect(calls()).toEqual([]);
    await w.rt.close();
  });

  it('OPENCOMMS_NO_SPAWN=1 keeps this process from spawning', async () => {
    const w = await world({ env: { OPENCOMMS_NO_SPAWN: '1' } });
    const id = await w.send('not from here');
    await new Promise((r) => setTimeout(r, 300));
    expect(calls()).toEqual([]);
    expect((await w.msg(id)).delivery_status).toBe('pending');
    await w.rt.close();
  });
});

describe('SPN-4 commit on exit 0; a failing CLI requeues in FIFO order with an error that holds no argv or output', () => {
  it('happy path: delivered, delivery_method spawn_push', async () => {
    const w = await world();
    const id = await w.send('hello worker');
    await until(async () => (await w.msg(id)).delivery_status === 'delivered');
    expect(await w.msg(id)).toMatchObject({ delivery_method: 'spawn_push', attempts: 1 });
    await w.rt.close();
  });

  it('failure: requeued at the front in order, retried after 2 s, error without argv, stdout or stderr', async () => {
    writeFileSync(exitFile, '3');
    const w = await world();
    const ids = [await w.send('first secret text'), await w.send('second secret text')];
    await until(async () => (await w.errors()).some((e) => /spawn delivery/.test(e)));
    await w.rt.settled();
    expect((await w.rt.read()).queues.sess_b).toEqual(ids);
    const err = (await w.errors()).find((e) => /spawn delivery/.test(e))!;
    expect(err).toMatch(
      /Delivery to session sess_b failed \(spawn delivery \(claude-code\) failed: exit code 3\); 2 re-queued/,
    );
    for (const leak of ['secret text', 'SECRET-STDOUT', 'SECRET-STDERR', '--resume', 'session-b', FAKE])
      expect(err).not.toContain(leak);
    writeFileSync(exitFile, '0');
    const failedAt = calls()[0]!.at;
    await until(async () => (await w.msg(ids[1]!)).delivery_status === 'delivered', 8000);
    expect(calls()[1]!.at - failedAt).toBeGreaterThanOrEqual(1900);
    expect(calls()).toHaveLength(2);
    await w.rt.close();
  }, 15_000);
});

describe('SPN-5 one spawn per member at a time; mail that arrives meanwhile is re-drained after it settles', () => {
  it('a second send during a running spawn does not start another; the re-drain after the cooldown takes it', async () => {
    process.env.FAKE_CLI_MS = '600';
    const w = await world();
    const a = await w.send('one');
    await until(() => calls().length === 1);
    const b = await w.send('two');
    const c = await w.send('three');
    await until(async () => (await w.msg(c)).delivery_status === 'delivered', 8000);
    const all = calls();
    expect(all).toHaveLength(2);
    expect(all[1]!.at - all[0]!.at).toBeGreaterThanOrEqual(600); // never overlapping
    expect(all[0]!.argv.at(-1)).toContain(a);
    expect(all[1]!.argv.at(-1)).toContain(b);
    expect(all[1]!.argv.at(-1)).toContain(c);
    await w.rt.close();
  }, 15_000);
});

describe('SPN-6 templates, shims and the EINVAL hint', () => {
  it('quote-aware templates: only " groups; an unterminated quote is an error', () => {
    expect(parseTemplate('/usr/bin/claude')).toEqual({ file: '/usr/bin/claude', prepend: [] });
    expect(parseTemplate('  "C:\\Program Files\\node.exe"  "C:\\x y\\cli.js" --flag ')).toEqual({
      file: 'C:\\Program Files\\node.exe',
      prepend: ['C:\\x y\\cli.js', '--flag'],
    });
    expect(parseTemplate("it's 'single' quotes")).toEqual({ file: "it's", prepend: ["'single'", 'quotes'] });
    expect(parseTemplate('"unterminated')).toEqual({ error: 'has an unterminated " quote' });
    expect(parseTemplate('   ')).toEqual({ error: 'is empty' });
  });

  it('an unterminated template is reported once and nothing is spawned; the mail waits', async () => {
    const w = await world({ env: { OPENCOMMS_CLAUDE_BIN: '"/bin/claude --x' } });
    const id = await w.send('x');
    await w.send('y');
    await new Promise((r) => setTimeout(r, 300));
    expect(calls()).toEqual([]);
    expect((await w.errors()).filter((e) => e.includes('OPENCOMMS_CLAUDE_BIN has an unterminated'))).toHaveLength(1);
    expect((await w.msg(id)).delivery_status).toBe('pending');
    await w.rt.close();
  });

  it('win32: a .cmd/.bat shim is refused before anything is drained', async () => {
    const exec: Exec = async () => 0;
    const s = new Spawner({
      project: dir,
      contracts: SPAWN_CONTRACTS,
      enabled: true,
      env: { OPENCOMMS_CLAUDE_BIN: 'C:\\npm\\claude.cmd' },
      platform: 'win32',
      exec,
    });
    const rt = openRuntime(dir, { spawn: s, log: () => {} });
    await rt.start();
    const caller = (sid: string, mode: string) => ({
      session_id: sid,
      host: 'claude-code',
      surface: 'mcp',
      delivery_mode: mode,
      host_session_id: null,
      project_id: 'local-project',
      worktree: dir,
    });
    await rt.run({
      op: 'create',
      caller: caller('sess_a', 'pull'),
      args: { channel: 'team', role: 'Lead', role_prompt: 'Lead.' },
    });
    await rt.run({
      op: 'join',
      caller: caller('sess_b', 'spawn_push'),
      args: { channel: 'team', role: 'Worker', role_prompt: 'Work.' },
    });
    await rt.run({ op: 'bind', member: 'sess_b', host: 'claude-code', host_session_id: 's' });
    await rt.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'x' } });
    await rt.settled();
    const st = await rt.read();
    expect(Object.values(st.messages).map((e) => e.delivery_status)).toEqual(['pending']);
    expect(st.errors.map((e) => e.message).join('\n')).toContain('.cmd/.bat shim');
    await rt.close();
  });

  it('a spawn that fails with EINVAL says to point the override at the real executable', async () => {
    const exec: Exec = async () => {
      throw Object.assign(new Error('spawn EINVAL claude --resume secret'), { code: 'EINVAL' });
    };
    const w = await world({ exec });
    await w.send('z');
    await until(async () => (await w.errors()).some((e) => e.includes('EINVAL')));
    const err = (await w.errors()).find((e) => e.includes('EINVAL'))!;
    expect(err).toContain('point OPENCOMMS_CLAUDE_BIN at the real executable');
    expect(err).not.toContain('secret');
    await w.rt.close();
  });
});

describe('SPN-7 a batch never exceeds one argv element; normal sizes are unaffected', () => {
  /** The ids of the envelopes one send queued for sess_b: its parts, in order. */
  const partsOf = async (w: World, content: string) => {
    const r = await w.rt.run({ op: 'send', sid: 'sess_a', args: { channel: 'team', content } });
    expect(r.ok, r.message).toBe(true);
    const d = r.data as { message_ids: string[]; part_message_ids?: string[][] };
    return d.part_message_ids?.[0] ?? d.message_ids;
  };
  /** The frame ids each spawn carried, in order. */
  const spawned = () =>
    calls().map((c) => [...c.argv.at(-1)!.matchAll(/\| id: (ocm_[0-9a-f]+) \|/g)].map((m) => m[1]!));

  it('a message of more UTF-8 bytes than one argv element holds travels as parts, each spawn within it, in order', async () => {
    const w = await world();
    const text = 'é'.repeat(70_000); // 140 000 UTF-8 bytes > SPAWN_ARG_MAX_BYTES
    const parts = await partsOf(w, text);
    expect(parts.length).toBeGreaterThan(1);
    await until(async () => (await w.msg(parts.at(-1)!)).delivery_status === 'delivered', 8000);
    expect(spawned().flat()).toEqual(parts);
    for (const c of calls()) expect(Buffer.byteLength(c.argv.at(-1)!)).toBeLessThanOrEqual(SPAWN_ARG_MAX_BYTES);
    expect((await Promise.all(parts.map((id) => w.msg(id)))).map((e) => e.content).join('')).toBe(text);
    await w.rt.close();
  }, 15_000);

  it('two large messages are spawned in batches within one argv element, FIFO', async () => {
    const w = await world();
    const a = await partsOf(w, `A${'x'.repeat(70_000)}`);
    const b = await partsOf(w, `B${'y'.repeat(70_000)}`);
    await until(async () => (await w.msg(b.at(-1)!)).delivery_status === 'delivered', 8000);
    const all = calls();
    expect(all.length).toBeGreaterThan(1);
    expect(spawned().flat()).toEqual([...a, ...b]);
    for (const c of all) expect(Buffer.byteLength(c.argv.at(-1)!)).toBeLessThanOrEqual(SPAWN_ARG_MAX_BYTES);
    await w.rt.close();
  }, 15_000);
});
