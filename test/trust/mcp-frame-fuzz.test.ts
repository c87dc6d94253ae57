// Issue 8, Prove 2: frame fuzzing of the real `opencomms mcp` process. Over 10,000 generated
// frames (not JSON, not UTF-8, wrong JSON-RPC shapes, huge ids, deep nesting, lines of exactly
// 1 MiB and one byte more, tool calls with wrong types, missing or extra fields, engine refusals
// and reads), written as one byte stream cut at every kind of boundary (inside multi-byte
// characters, between "\r" and "\n", anywhere). Afterwards the server is alive, answers ping,
// answered every frame as its kind demands with no internal error and no stack trace, and the
// project's files are byte-identical. FUZZ_SEED=<n> replays a run; the seed is in every message.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MCP_MAX_FRAME_BYTES } from '../../src/protocol/limits.ts';
import { initialize, spawnRawMcp, type RawMcp } from '../helpers/raw-mcp.ts';
import { snapshotTree } from '../helpers/tree.ts';
import { anyFrame, sizeFrames, type Frame } from './mcp-frames.ts';
import { leaksInternals, seedMcpProject, type McpProject } from './mcp-fixture.ts';

const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const FRAMES = 10_000;
const at = `(FUZZ_SEED=${SEED})`;

let project: McpProject;
let server: RawMcp;

beforeAll(async () => {
  project = await seedMcpProject(mkdtempSync(join(tmpdir(), 'opencomms-fuzz-')));
});
afterAll(() => {
  if (server?.child.exitCode === null) server.child.kill('SIGKILL');
  rmSync(project.dir, { recursive: true, force: true });
});

/** The frames, terminated by "\n" or "\r\n" (and some blank lines), as one stream, with the cut
 *  points that split it into chunks: every kind of boundary occurs many times. */
function stream(frames: Frame[], random: () => number) {
  const parts: Buffer[] = [];
  const cuts: number[] = [];
  const kinds = { crlf: 0, multibyte: 0, other: 0 };
  let offset = 0;
  for (const f of frames) {
    const crlf = random() < 0.5;
    const line = Buffer.concat([
      f.bytes,
      Buffer.from(crlf ? '\r\n' : '\n'),
      Buffer.from(random() < 0.02 ? '\r\n' : ''),
    ]);
    if (f.bytes.length < 4096) {
      for (let i = 1; i < f.bytes.length; i++)
        if ((f.bytes[i]! & 0xc0) === 0x80 && random() < 0.3) {
          cuts.push(offset + i); // inside a multi-byte character
          kinds.multibyte++;
        }
      if (crlf && random() < 0.5) {
        cuts.push(offset + f.bytes.length + 1); // between "\r" and "\n"
        kinds.crlf++;
      }
    }
    if (random() < 0.3) {
      cuts.push(offset + Math.floor(random() * line.length));
      kinds.other++;
    }
    parts.push(line);
    offset += line.length;
  }
  const bytes = Buffer.concat(parts);
  const points = [...new Set(cuts)].filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b);
  return { bytes, points, kinds };
}

describe('MCP frame fuzzing (real server process)', () => {
  it(`${FRAMES} generated frames: the server never exits, answers each as its kind demands, then ping; the project is byte-identical`, async () => {
    const before = snapshotTree(project.dir);
    server = spawnRawMcp(project.dir, project.pin);
    await initialize(server);

    const makers = fc.sample(anyFrame(project.fixture), { seed: SEED, numRuns: FRAMES });
    const frames = makers.map((make, n) => fc.sample(make(n), { seed: SEED + n + 1, numRuns: 1 })[0]!);
    // The six 1 MiB lines go in at generated positions among the rest.
    const entropy = fc.sample(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
      seed: SEED,
      numRuns: 50_000,
    });
    let e = 0;
    const random = () => entropy[e++ % entropy.length]!;
    for (const f of sizeFrames('size')) frames.splice(Math.floor(random() * frames.length), 0, f);
    const { bytes, points, kinds } = stream(frames, random);
    expect(
      Math.min(kinds.crlf, kinds.multibyte, kinds.other),
      `every boundary kind is cut ${JSON.stringify(kinds)} ${at}`,
    ).toBeGreaterThan(100);

    let from = 0;
    for (const p of [...points, bytes.length]) {
      await server.write(bytes.subarray(from, p));
      from = p;
    }
    await server.write('{"jsonrpc":"2.0","id":"final-ping","method":"ping"}\n');
    expect((await server.response('final-ping', 120_000)).result, at).toEqual({});
    expect(server.child.exitCode, `the server is still running ${at}`).toBeNull();
    expect(server.badLines, `stdout carries JSON-RPC only ${at}`).toEqual([]);

    // Every response: no internal error, nothing internal leaked.
    const internal = server.lines.filter((m) => m?.error?.code === -32603).map((m) => JSON.stringify(m).slice(0, 200));
    expect(internal.slice(0, 10), `${internal.length} JSON-RPC internal error(s) ${at}`).toEqual([]);
    const leaks: string[] = [];
    for (const m of server.lines) {
      const texts = [m?.error?.message, ...(m?.result?.content ?? []).map((c: { text?: string }) => c.text)].filter(
        (t): t is string => typeof t === 'string',
      );
      for (const t of texts) if (leaksInternals(t)) leaks.push(t.slice(0, 300));
      for (const c of m?.result?.content ?? []) {
        const r = JSON.parse(c.text);
        if (r.data?.reason === 'internal_error') leaks.push(`internal_error result: ${c.text.slice(0, 200)}`);
      }
    }
    expect(
      leaks.slice(0, 10),
      `${leaks.length} answer(s) with a stack trace, file path or internal error ${at}`,
    ).toEqual([]);

    // Each frame with an id got the answer its kind demands.
    const wrong: string[] = [];
    for (const f of frames) {
      const x = f.expect;
      if (x.kind === 'any' || x.id === null) continue;
      const m = await server.response(x.id, 10_000).catch(() => null);
      const text = m?.result?.content?.[0]?.text;
      const r = text ? JSON.parse(text) : null;
      const got = m?.error
        ? `error ${m.error.code}`
        : r
          ? r.ok
            ? 'ok'
            : `refusal ${r.data?.reason}`
          : JSON.stringify(m)?.slice(0, 100);
      const want = x.kind === 'rpc_error' ? `error ${x.code}` : x.kind === 'refusal' ? `refusal ${x.reason}` : 'ok';
      if (got !== want) wrong.push(`${f.label}: wanted ${want}, got ${got}`);
    }
    expect(wrong.slice(0, 20), `${wrong.length} frame(s) answered wrongly ${at}`).toEqual([]);
    const oversized = server.lines.filter(
      (m) => m?.error?.code === -32700 && String(m.id).startsWith('size-over'),
    ).length;
    expect(oversized, `every line of ${MCP_MAX_FRAME_BYTES + 1} bytes is refused with its id ${at}`).toBe(4);

    server.child.stdin.end();
    expect(await server.exited, `exits cleanly on stdin end ${at}`).toBe(0);
    expect(snapshotTree(project.dir), `refused and read-only calls left every file byte-identical ${at}`).toEqual(
      before,
    );
  }, 120_000);
});
