// `opencomms mcp` JSON-RPC wire (FEATURES.md §3.2, §7.1, §7.3, MCP-5, MCP-6, MCP-8): initialize,
// tools/list, error codes, oversized and malformed frames, stdout carrying JSON-RPC only, exit when
// stdin ends. Cases that read raw output start their own hand-driven server, so each sees only its
// own lines.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { initialize, spawnRaw, type RawServer } from '../../helpers/mcp-client.ts';
import { ok, pinFor, rpcCode, stateText, useMcpProject, type McpHandle } from '../../helpers/mcp-fixture.ts';
import { MCP_MAX_FRAME_BYTES } from '../../../src/protocol/limits.ts';
import { ALL_TOOLS, IDENTITY_ARGS, NON_ADMIN_TOOLS, REQUIRED } from '../../helpers/mcp-spec.ts';

const VERSION = (
  JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string }
).version;
/** A frame comfortably over the 1 MiB line limit. */
const OVERSIZED = 1.5 * MCP_MAX_FRAME_BYTES;

const p = useMcpProject({
  A: { pin: pinFor('a'), admin: true },
  U: {}, // unpinned, no --admin
});

const raws: RawServer[] = [];
const raw = (pin?: string) => {
  const w = spawnRaw(p.dir, pin === undefined ? {} : { pin });
  raws.push(w);
  return w;
};
afterEach(() => {
  for (const w of raws.splice(0)) if (w.child.exitCode === null) w.child.kill();
});

/** Every stdout line a JSON-RPC 2.0 response: one per request, none for a notification. */
function onlyResponses(w: RawServer, ids: Array<number | null>) {
  expect(w.badLines).toEqual([]);
  expect(w.lines.map((m) => m.id)).toEqual(ids);
  for (const m of w.lines) {
    expect(m.jsonrpc).toBe('2.0');
    expect('result' in m || 'error' in m).toBe(true);
  }
}

describe('MCP wire', () => {
  it('MCP-5 initialize: serverInfo opencomms and the tools capability; 2024-11-05 is accepted, and so is the SDK client’s own version', async () => {
    expect(p.h.A.client.getServerVersion()).toEqual({ name: 'opencomms', version: VERSION });
    expect(typeof p.h.A.client.getServerCapabilities()?.tools).toBe('object');

    const w = raw(pinFor('w'));
    w.write(initialize(1, '2024-11-05'));
    const r = await w.take((m) => m.id === 1);
    expect(r.error).toBeUndefined();
    expect(r.result).toMatchObject({
      protocolVersion: '2024-11-05',
      serverInfo: { name: 'opencomms', version: VERSION },
    });
    expect(typeof r.result.capabilities.tools).toBe('object');
    w.write({ jsonrpc: '2.0', method: 'notifications/initialized' });
    w.write({ jsonrpc: '2.0', id: 2, method: 'ping' });
    expect((await w.take((m) => m.id === 2)).result).toEqual({});
    expect(await w.end()).toBe(0);
    onlyResponses(w, [1, 2]);
  });

  it('MCP-8, MCP-6 via the SDK client: unknown or unlisted tool, missing or mistyped argument → -32602 before anything runs; oversized call → -32700, then the next call answers', async () => {
    const { A, U } = p.h;
    await ok(A, 'opencomms_create', { channel: 'sdk-wire', role: 'Alpha', role_prompt: 'p' });
    const before = stateText(p.dir);
    const call = (h: McpHandle, name: string, args: Record<string, unknown>) =>
      h.client.callTool({ name, arguments: args }, undefined, { timeout: 10_000 });
    expect(await rpcCode(call(A, 'opencomms_nope', {}))).toBe(-32602);
    expect(await rpcCode(call(U, 'opencomms_kick', { channel: 'sdk-wire', target_role: 'Alpha' }))).toBe(-32602); // unlisted without --admin
    expect(await rpcCode(call(A, 'opencomms_send', { channel: 'sdk-wire' }))).toBe(-32602);
    expect(await rpcCode(call(A, 'opencomms_delete_session', { channel: 'sdk-wire' }))).toBe(-32602);
    expect(await rpcCode(call(A, 'opencomms_create', { channel: 'x', role: 'R' }))).toBe(-32602);
    expect(await rpcCode(call(U, 'opencomms_send', { content: 'x' }))).toBe(-32602); // checked before identity
    expect(await rpcCode(call(A, 'opencomms_send', { channel: 'sdk-wire', content: 42 }))).toBe(-32602);
    expect(await rpcCode(call(A, 'opencomms_delete_session', { channel: 'sdk-wire', confirm: 'yes' }))).toBe(-32602);
    expect(await rpcCode(call(A, 'opencomms_inbox', { channel: 'sdk-wire', limit: '5' }))).toBe(-32602);
    expect(await rpcCode(call(A, 'opencomms_send', { channel: ['sdk-wire'], content: 'x' }))).toBe(-32602);
    expect(await rpcCode(call(A, 'opencomms_send', { channel: 'sdk-wire', content: 'z'.repeat(OVERSIZED) }))).toBe(
      -32700,
    );
    expect(stateText(p.dir)).toBe(before); // nothing ran: the delete with confirm "yes" included
    const st = await ok(A, 'opencomms_status', {});
    expect(st.data.channels.map((c: { name: string }) => c.name)).toEqual(['sdk-wire']);
  });

  it('MCP-6 raw: the SDK’s latest version; -32601, -32700 (malformed, oversized) with id null and the server keeps serving; stdout is JSON-RPC only; exits 0 on stdin end', async () => {
    const w = raw();
    expect(LATEST_PROTOCOL_VERSION > '2024-11-05').toBe(true); // not the version the case above tried
    w.write(initialize(1, LATEST_PROTOCOL_VERSION));
    expect((await w.take((m) => m.id === 1)).result).toMatchObject({
      protocolVersion: LATEST_PROTOCOL_VERSION,
      serverInfo: { name: 'opencomms' },
    });
    w.write({ jsonrpc: '2.0', method: 'notifications/initialized' });

    w.write({ jsonrpc: '2.0', id: 10, method: 'foo/bar', params: {} });
    expect((await w.take((m) => m.id === 10)).error.code).toBe(-32601);

    w.write('{"jsonrpc":"2.0","id":11,"method":"ping"');
    expect(await w.take((m) => m.id === null)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: expect.any(String) },
    });
    w.write({ jsonrpc: '2.0', id: 12, method: 'ping' });
    expect((await w.take((m) => m.id === 12)).result).toEqual({});

    // A 1.5 MiB line whose id sits where it cannot be trusted → id null.
    w.write(
      `{"jsonrpc":"2.0","method":"tools/call","id":13,"params":{"name":"opencomms_status","arguments":{"pad":"${'p'.repeat(OVERSIZED)}"}}}`,
    );
    const big = await w.take((m) => m.id === null);
    expect(big.error.code).toBe(-32700);
    expect(big.error.message).toContain(String(MCP_MAX_FRAME_BYTES));
    w.write({ jsonrpc: '2.0', id: 14, method: 'tools/list' });
    expect((await w.take((m) => m.id === 14)).result.tools).toHaveLength(16);

    // Through tools/call: an unknown tool → -32602; a tool result → isError identity_unpinned.
    w.write({ jsonrpc: '2.0', id: 15, method: 'tools/call', params: { name: 'nope', arguments: {} } });
    expect((await w.take((m) => m.id === 15)).error.code).toBe(-32602);
    w.write({ jsonrpc: '2.0', id: 16, method: 'tools/call', params: { name: 'opencomms_status', arguments: {} } });
    const st = (await w.take((m) => m.id === 16)).result;
    expect(st.isError).toBe(true);
    expect(JSON.parse(st.content[0].text).data.reason).toBe('identity_unpinned');

    expect(await w.end()).toBe(0);
    onlyResponses(w, [1, 10, null, 12, null, 14, 15, 16]);
  });
});

describe('tools/list', () => {
  it('MCP-8 lists 17 tools with --admin and 16 without (no kick), whether or not a pin is set', async () => {
    expect(NON_ADMIN_TOOLS).toHaveLength(16);
    expect(ALL_TOOLS).toHaveLength(17);
    const names = async (h: McpHandle) => (await h.client.listTools()).tools.map((t) => t.name).sort();
    expect(await names(p.h.A)).toEqual(ALL_TOOLS); // --admin, pinned
    expect(await names(p.h.U)).toEqual(NON_ADMIN_TOOLS); // no --admin, unpinned
  });

  it('every tool has a description, an object schema with the §7.3 required arguments, and no identity argument', async () => {
    const { tools } = await p.h.A.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS);
    for (const t of tools) {
      const props = Object.keys(t.inputSchema.properties ?? {});
      expect(t.description?.trim().length, t.name).toBeGreaterThan(20);
      expect(t.inputSchema.type).toBe('object');
      expect([...(t.inputSchema.required ?? [])].sort(), t.name).toEqual([...REQUIRED[t.name]!].sort());
      for (const k of REQUIRED[t.name]!) expect(props, t.name).toContain(k);
      for (const k of IDENTITY_ARGS) expect(props, t.name).not.toContain(k);
    }
  });
});
