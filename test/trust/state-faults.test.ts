// Issue 8, fix-first items 2, 4 and 5: faults of the state file are refusals, not JSON-RPC errors
// or exceptions, through both adapters; merely starting a server or a refused call writes
// nothing; an unexpected fault is `internal_error` and is recorded in state.errors.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OpenCommsPlugin } from '../../adapters/opencode/plugin.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { emptyState } from '../../src/protocol/schema.ts';
import { MemoryStore, type MutateOutcome, type Store, type StoreChange } from '../../src/store/index.ts';
import type { State } from '../../src/protocol/schema.ts';
import { startMcp, type McpHandle } from '../helpers/mcp-client.ts';

const dirs: string[] = [];
const handles: McpHandle[] = [];
afterEach(async () => {
  await Promise.allSettled(handles.splice(0).map((h) => h.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const project = () => {
  const d = mkdtempSync(join(tmpdir(), 'opencomms-faults-'));
  dirs.push(d);
  return d;
};
const pin = () => `sess_${Math.random().toString(16).slice(2, 14).padEnd(12, '0')}`;

/** A schema-3 file: another OpenComms' state, to be refused and never touched. */
function incompatible(dir: string) {
  mkdirSync(join(dir, '.opencomms'));
  const file = join(dir, '.opencomms', 'state.json');
  writeFileSync(file, `${JSON.stringify({ schema_version: 3, channels: { keep: 'me' } })}\n`);
  return () => readFileSync(file, 'utf8');
}

/** A minimal OpenCode client: every session is a root session, idle, and accepts prompts. */
const fakeClient = () => ({
  session: {
    get: async ({ path }: { path: { id: string } }) => ({ data: { id: path.id } }),
    status: async () => ({ data: {} }),
    messages: async () => ({ data: [] }),
    prompt: async () => ({}),
  },
});

async function openCodeTools(dir: string) {
  const hooks = (await OpenCommsPlugin({
    client: fakeClient(),
    project: { id: 'proj' },
    directory: dir,
    worktree: dir,
  })) as {
    tool: Record<string, { execute(args: Record<string, unknown>, ctx: { sessionID: string }): Promise<string> }>;
  };
  return (name: string, args: Record<string, unknown>, sessionID = 'ses_fault1') =>
    hooks.tool[name]!.execute(args, { sessionID }).then(
      (t) => JSON.parse(t) as { ok: boolean; data?: { reason?: string } },
    );
}

describe('item 2: an incompatible state file is a state_incompatible refusal on every surface', () => {
  it('MCP: gated and bootstrap tools answer the refusal as a tool result; the file is byte-identical', async () => {
    const dir = project();
    const bytes = incompatible(dir);
    const before = bytes();
    const h = await startMcp(dir, { pin: pin() });
    handles.push(h);
    for (const [tool, args] of [
      ['opencomms_status', {}],
      ['opencomms_send', { channel: 'keep', content: 'x' }],
      ['opencomms_pull', {}],
      ['opencomms_create', { channel: 'new', role: 'Lead', role_prompt: 'p' }],
      ['opencomms_archive', {}],
      ['opencomms_delete_session', { channel: 'keep', confirm: true }],
    ] as const) {
      const r = await h.call(tool, args);
      expect({ tool, ok: r.ok, reason: r.data?.reason }).toEqual({ tool, ok: false, reason: 'state_incompatible' });
      expect(r.message).toMatch(/schema_version 3/);
    }
    expect(bytes()).toBe(before);
    expect(readdirSync(join(dir, '.opencomms'))).toEqual(['state.json']);
  });

  it('OpenCode: linked and unlinked tools return the refusal instead of throwing', async () => {
    const dir = project();
    const bytes = incompatible(dir);
    const before = bytes();
    const call = await openCodeTools(dir);
    for (const [tool, args] of [
      ['opencomms_send', { channel: 'keep', content: 'x' }],
      ['opencomms_status', {}],
      ['opencomms_join', { channel: 'keep', role: 'Lead', role_prompt: 'p' }],
    ] as const)
      expect(await call(tool, args)).toMatchObject({ ok: false, data: { reason: 'state_incompatible' } });
    expect(bytes()).toBe(before);
  });
});

describe('item 4: nothing is created by a refused call or by starting a server', () => {
  it('starting `opencomms mcp` and answering refusals leaves the project untouched', async () => {
    const dir = project();
    const h = await startMcp(dir, { pin: pin() });
    handles.push(h);
    expect((await h.call('opencomms_status', {})).data?.reason).toBe('identity_not_member');
    expect((await h.call('opencomms_join', { channel: 'nope', role: 'Lead', role_prompt: 'p' })).data?.reason).toBe(
      'channel_not_found',
    );
    expect((await h.call('opencomms_archive', {})).ok).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
    // The first successful mutation creates the directory and its .gitignore (§2).
    expect((await h.call('opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'p' })).ok).toBe(true);
    // A server that has written keeps its lock token (src/store/file/lock.ts) until it exits. The
    // snapshot's journal is created with it (src/store/file/store.ts, `journal_created`).
    const token = /^\.state-lock\.\d+\.[0-9a-f]{8}\.tmp$/;
    expect(
      readdirSync(join(dir, '.opencomms'))
        .filter((n) => !token.test(n))
        .sort(),
    ).toEqual(['.gitignore', 'journal', 'state.json']);
    await h.close();
    expect(readdirSync(join(dir, '.opencomms')).sort()).toEqual(['.gitignore', 'journal', 'state.json']);
  });

  it('the OpenCode plugin starting up and refusing a send writes nothing', async () => {
    const dir = project();
    const call = await openCodeTools(dir);
    expect((await call('opencomms_send', { channel: 'team', content: 'x' })).data?.reason).toBe('not_linked');
    await new Promise((r) => setTimeout(r, 50)); // the plugin's deferred start-up sweep has run
    expect(existsSync(join(dir, '.opencomms'))).toBe(false);
  });
});

/** A store whose mutations throw once: an unexpected fault deep in a command. */
class FaultyOnce implements Store {
  readonly location = 'faulty';
  private failed = false;
  constructor(private readonly inner = new MemoryStore(emptyState())) {}
  read = () => this.inner.read();
  peek = () => this.inner.peek();
  catchUp = () => this.inner.catchUp();
  revision = () => this.inner.revision();
  mutate<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    if (!this.failed) {
      this.failed = true;
      return Promise.reject(new Error('disk on fire at /secret/path'));
    }
    return this.inner.mutate(fn);
  }
  subscribe = (onChange: (change: StoreChange) => Promise<void>) => this.inner.subscribe(onChange);
  history = (c: string, l: number) => this.inner.history(c, l);
  historyIds = (c: string) => this.inner.historyIds(c);
  findInHistory = (c: string, m: string, n: number) => this.inner.findInHistory(c, m, n);
  archive = (id: string) => this.inner.archive(id);
  archiveByName = (n: string) => this.inner.archiveByName(n);
  archives = () => this.inner.archives();
  close = () => this.inner.close();
}

describe('item 5: internal_error is recorded in state.errors like every other failure', () => {
  it('the caller gets internal_error without details; the operator finds the details in errors', async () => {
    const logs: string[] = [];
    const rt = new Runtime(new FaultyOnce(), { log: (l) => logs.push(l) });
    const caller = {
      session_id: 'sess_a',
      host: 'mcp',
      surface: 'mcp',
      delivery_mode: 'pull',
      host_session_id: null,
      project_id: 'p',
      worktree: '/w',
    };
    const r = await rt.run({ op: 'create', caller, args: { channel: 'team', role: 'Lead', role_prompt: 'p' } });
    expect(r).toMatchObject({ ok: false, data: { reason: 'internal_error' } });
    expect(r.message).not.toContain('disk on fire');
    const errors = (await rt.read()).errors;
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ reason: 'internal_error' });
    expect(errors[0]!.message).toContain('Internal error in create: disk on fire');
    expect(errors[0]!.message).not.toMatch(/\n\s+at /); // no stack trace in state
    expect(logs.join('\n')).toMatch(/internal error in create/);
    const status = await rt.run({ op: 'operator_status' });
    expect((status.data as { errors: unknown[] }).errors).toHaveLength(1);
    await rt.close();
  });
});
