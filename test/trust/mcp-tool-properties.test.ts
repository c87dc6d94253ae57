// Issue 8, Prove 2: property tests over the arguments of every MCP tool (the --admin server, so
// kick too), in-process over the SDK's in-memory transport so an unhandled exception fails the
// run. For any arguments: a ToolResult (a refusal with a listed reason, never internal_error) or
// -32602, no JSON-RPC internal error, no stack trace or file path in anything returned, and no
// identity but the pinned one ever appears in the state. FUZZ_SEED=<n> replays a run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { buildServer } from '../../adapters/mcp/server.ts';
import { toolsFor, type ToolDef } from '../../adapters/tools.ts';
import { REASONS } from '../../src/protocol/result.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { fieldsOf, IDENTITY_KEYS, type JsonType } from './mcp-frames.ts';
import { leaksInternals, seedMcpProject, type McpProject } from './mcp-fixture.ts';

const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const RUNS = 120;

/** Values an agent (or an attacker) might put in an argument of JSON type `type`. */
function typed(p: McpProject, type: JsonType): fc.Arbitrary<unknown> {
  if (type === 'boolean') return fc.boolean();
  if (type === 'number')
    return fc.oneof(
      fc.integer({ min: -3, max: 3 }),
      fc.constantFrom(1e308, -1e308, 0.5, 2 ** 53 + 2, 60_000, 2_592_000_000),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
    );
  return fc.oneof(
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        p.fixture.channel,
        p.fixture.archived,
        'FUZZ',
        ' fuzz ',
        'Alpha',
        'beta',
        p.pin,
        p.peer,
        p.fixture.messageId,
        'operator',
        '../../etc/passwd',
        '/etc/passwd',
        'a\u0000b',
        'chn_../../x',
        '<<<END_UNTRUSTED_PEER_MESSAGE>>>',
        '',
        ' ',
        'start',
        'switch',
        'set_limit',
        'list',
        'summary',
        'messages',
        'review_request',
        'system',
        'x'.repeat(100_001),
      ),
    },
    { weight: 2, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  );
}

/** Arguments of `tool`: each known one mostly of its own type (so most calls reach the engine),
 *  sometimes of any type, plus identity-like and random extra keys. */
function argumentsOf(p: McpProject, tool: ToolDef): fc.Arbitrary<Record<string, unknown>> {
  const fields = fieldsOf(tool);
  const anything = fc.oneof(fc.constant(null), fc.jsonValue({ maxDepth: 3 }));
  const model = Object.fromEntries(
    Object.entries(fields).map(([k, f]) => [
      k,
      fc.oneof({ weight: 9, arbitrary: typed(p, f.type) }, { weight: 1, arbitrary: anything }),
    ]),
  );
  const known = fc.oneof(
    { weight: 9, arbitrary: fc.record(model, { requiredKeys: tool.required }) },
    { weight: 1, arbitrary: fc.record(model, { requiredKeys: [] }) },
  );
  const extra = fc.dictionary(fc.oneof(fc.constantFrom(...IDENTITY_KEYS), fc.string({ maxLength: 10 })), anything, {
    maxKeys: 3,
  });
  return fc
    .tuple(known, extra)
    .map(([k, e]) => ({ ...Object.fromEntries(Object.entries(e).filter(([x]) => !(x in fields))), ...k }));
}

const tools = toolsFor('mcp', true);
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

async function serve(): Promise<{ p: McpProject; rt: Runtime; client: Client; logs: string[] }> {
  const p = await seedMcpProject(mkdtempSync(join(tmpdir(), 'opencomms-props-')));
  const logs: string[] = [];
  const rt = openRuntime(p.dir, { log: (l) => logs.push(l) });
  const server = buildServer(rt, { host: 'mcp', admin: true, pin: p.pin, project: p.dir, projectId: 'local-project' });
  const [ct, st] = InMemoryTransport.createLinkedPair();
  await server.connect(st);
  const client = new Client({ name: 'props', version: '0' });
  await client.connect(ct);
  cleanup.push(async () => {
    await client.close();
    await rt.close();
    rmSync(p.dir, { recursive: true, force: true });
  });
  return { p, rt, client, logs };
}

describe('MCP tool arguments (property tests, every tool)', () => {
  it.each(tools.map((t) => [t.name, t] as const))(
    '%s: any arguments → a ToolResult or -32602, nothing internal, identity stays the pin',
    async (_name, tool) => {
      const { p, rt, client, logs } = await serve();
      let results = 0;
      await fc.assert(
        fc.asyncProperty(argumentsOf(p, tool), async (a) => {
          let text: string;
          try {
            const r = (await client.callTool({ name: tool.name, arguments: a })) as {
              content: Array<{ text: string }>;
              isError?: boolean;
            };
            text = r.content[0]!.text;
            results++;
            const result = JSON.parse(text) as { ok: unknown; message: unknown; data?: { reason?: string } };
            expect(typeof result.ok).toBe('boolean');
            expect(typeof result.message === 'string' && result.message.length > 0).toBe(true);
            expect(Boolean(r.isError)).toBe(!result.ok);
            if (!result.ok) {
              expect(REASONS).toContain(result.data?.reason);
              expect(result.data?.reason).not.toBe('internal_error');
            }
          } catch (e) {
            const code = (e as { code?: unknown }).code;
            if (code !== -32602) throw e; // an internal error (-32603), a crash, or a failed check above
            text = (e as Error).message;
          }
          expect(leaksInternals(text), text.slice(0, 300)).toBe(false);
          // Nobody but the pinned member (and the peer the fixture made) is ever on a roster or a sender.
          const s = await rt.peek();
          for (const ch of Object.values(s.channels))
            for (const m of ch.members) expect([p.pin, p.peer]).toContain(m.session_id);
          for (const e of Object.values(s.messages)) expect([p.pin, p.peer, 'operator']).toContain(e.sender_session_id);
        }),
        { seed: SEED, numRuns: RUNS },
      );
      expect(
        logs.filter((l) => /internal error/i.test(l)),
        `FUZZ_SEED=${SEED}`,
      ).toEqual([]);
      // Many generated calls must reach the engine, or the property says little about it. How many
      // depends on the seed more than on chance: fast-check's lean toward edge values shifts with
      // it (opencomms_create, whose three required fields must all pass the schema: 41–66 of 120
      // over 24 seeds, and 35 at FUZZ_SEED=1267308443), so the floor is a quarter.
      expect(results, `FUZZ_SEED=${SEED}: ${results} of ${RUNS} calls reached a tool`).toBeGreaterThan(RUNS / 4);
    },
    60_000,
  );
});
