// The MCP tests' fixture: one temp project and its `opencomms mcp` servers per test file, started
// and stopped in that file's own hooks; the assertions every case uses; and the operator's view of
// the state file. After every case each pinned member leaves every channel it is on, so no case
// sees another's members or mail whatever the order (every case also names its own channels).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { startMcp, type McpHandle, type Result, type ServerOptions } from './mcp-client.ts';
import { editStateSync, readStateSync, stateBytes } from './state-files.ts';

export type { McpHandle, Result };

/** A fresh, well-formed pin (member id) per server; `tag` only helps reading failures. */
export const pinFor = (tag: string) => `sess_${tag}${randomBytes(10).toString('hex')}`;

// ---- assertions ----------------------------------------------------------------------------------

const show = (name: string, args: Record<string, unknown>, r: Result) =>
  `${name} ${JSON.stringify(args).slice(0, 200)} → ${r.message}`;

export async function ok(h: McpHandle, name: string, args: Record<string, unknown> = {}): Promise<Result> {
  const r = await h.call(name, args);
  expect(r.ok, show(name, args, r)).toBe(true);
  return r;
}

/** A refusal: isError:true on the wire, ok:false, `data.reason`, and a message saying what to do. */
export async function refused(
  h: McpHandle,
  name: string,
  args: Record<string, unknown>,
  reason: string,
): Promise<Result> {
  const raw = (await h.raw(name, args)) as { content: Array<{ type: string; text: string }>; isError?: boolean };
  expect(raw.content).toHaveLength(1);
  expect(raw.content[0]!.type).toBe('text');
  const r = JSON.parse(raw.content[0]!.text) as Result;
  expect({ isError: raw.isError, ok: r.ok, reason: r.data?.reason }, show(name, args, r)).toEqual({
    isError: true,
    ok: false,
    reason,
  });
  expect(r.message.trim().length).toBeGreaterThan(10);
  return r;
}

/** The JSON-RPC error code a request was answered with. */
export async function rpcCode(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number') return code;
    throw e;
  }
  throw new Error('expected a JSON-RPC error, got a result');
}

/** A 2-member channel: `x` creates it as Alpha (coordinator), `y` joins as Beta. */
export async function pair(
  x: McpHandle,
  y: McpHandle,
  channel: string,
  opts: Record<string, unknown> = {},
): Promise<Result> {
  const created = await ok(x, 'opencomms_create', { channel, role: 'Alpha', role_prompt: 'You are Alpha.', ...opts });
  await ok(y, 'opencomms_join', { channel, role: 'Beta', role_prompt: 'You are Beta.' });
  return created;
}

// ---- the state file, as an operator sees it ------------------------------------------------------

export const statePath = (project: string) => join(project, '.opencomms', 'state.json');
/** The bytes of every state file (state.json and its journals), or null while there is none. */
export const stateText = (project: string): string | null =>
  existsSync(statePath(project)) ? stateBytes(project) : null;
/** The state as a process loads it: state.json and the journal it names. */
export const readState = (project: string): any => readStateSync(project);
/** An operator's direct edit of the state between calls: a whole new state.json, by rename. */
export const editState = (project: string, fn: (s: any) => void) => editStateSync(project, fn);

// ---- one project and its servers per test file ---------------------------------------------------

export interface ServerSpec extends ServerOptions {
  /** How this server spells the project directory on its command line (default: as created). */
  spelling?: (project: string) => string;
}

export interface McpProject<N extends string> {
  /** The project directory (real path), alone in a temp folder of its own, so `prepare` may put
   *  other spellings of it (a symlink, a sibling to `..` out of) next to it. */
  dir: string;
  h: Record<N, McpHandle>;
  pin: Record<N, string>;
}

/**
 * Starts one server per entry in `beforeAll` (all at once), closes them and removes the project in
 * `afterAll`, and makes every pinned member leave every channel after each case. `prepare` runs on
 * the new project directory before any server starts.
 */
export function useMcpProject<N extends string>(
  servers: Record<N, ServerSpec>,
  prepare?: (project: string) => void,
): McpProject<N> {
  const p = { dir: '', h: {}, pin: {} } as McpProject<N>;
  const names = Object.keys(servers) as N[];
  beforeAll(async () => {
    p.dir = join(realpathSync(mkdtempSync(join(tmpdir(), 'opencomms-mcp-'))), 'project');
    mkdirSync(p.dir);
    prepare?.(p.dir);
    const started = await Promise.all(names.map((n) => startMcp(servers[n].spelling?.(p.dir) ?? p.dir, servers[n])));
    names.forEach((n, i) => {
      p.h[n] = started[i]!;
      p.pin[n] = servers[n].pin ?? '';
    });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(names.map((n) => leaveEverything(p.h[n])));
  });
  afterAll(async () => {
    await Promise.allSettled(names.map((n) => p.h[n]?.close()));
    if (p.dir) rmSync(dirname(p.dir), { recursive: true, force: true });
  });
  return p;
}

/** The member leaves every live channel it is on (its mail there is rejected with it). */
async function leaveEverything(h: McpHandle | undefined) {
  if (!h) return;
  const st = await h.call('opencomms_status', {});
  if (!st.ok) {
    expect(['identity_unpinned', 'identity_not_member'], st.message).toContain(st.data?.reason); // no pin, or on no roster
    return;
  }
  for (const c of st.data.channels as Array<{ name: string }>) await ok(h, 'opencomms_disconnect', { channel: c.name });
}
