// The floor the MCP figures are divided by: an MCP server with the same SDK and the same stdio
// transport as `opencomms mcp`, whose `send` appends one JSON line to a file and whose `read`
// returns the last lines, read backwards from the end (so a read costs what it returns, not the
// file's length, as OpenComms' reads do). Whatever OpenComms costs beyond this is its own.
// With --framed, each line also holds the message framed as OpenComms frames it (protocol.md "Framing",
// by its own framing module) and `read` answers in the shape of `opencomms_pull`: the cost of
// carrying that answer over MCP, with nothing of a store behind it.
// With --pg, `send` is one INSERT in autocommit into the table OPENCOMMS_FLOOR_TABLE of the server
// OPENCOMMS_FLOOR_DATABASE_URL, and `read` takes the newest `limit` rows out in one DELETE of a
// SELECT … RETURNING and answers them framed, in the shape of `opencomms_pull` (frames made as it
// reads, as a pull makes them): what a store on that server cannot do in fewer round trips.
// A read given `max_size` answers as `opencomms_pull` does within a host's tool result (protocol.md
// "Route limits"): the oldest of what it took first, each entry counted as a pull counts it
// (AnswerRoom), with `more_than_fits` and
// `remaining`; what did not fit waits in memory and the next reads answer it, taking nothing more
// out of the file or table until it is answered (the store's part stays one read of 100).
//   node floor-server.mjs <dir> [--framed | --pg]
import { appendFileSync, closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import pg from 'pg';
import * as z from 'zod';
import { acceptedEnvelope } from '../src/engine/transitions.ts';
import { AnswerRoom, frameEnvelope, UNTRUSTED_NOTICE } from '../src/framing.ts';
import { LineLimitedStdioTransport } from '../adapters/mcp/transport.ts';

const framed = process.argv[3] === '--framed';
const table = process.argv[3] === '--pg' ? process.env.OPENCOMMS_FLOOR_TABLE : undefined;
const db = table ? new pg.Client(process.env.OPENCOMMS_FLOOR_DATABASE_URL) : null;
await db?.connect();
const file = join(process.argv[2] ?? '.', framed ? 'floor-framed.jsonl' : 'floor.jsonl');
const server = new McpServer({ name: 'floor', version: '1.0.0' }, { capabilities: { tools: {} } });
let n = 0;

const CHUNK = 64 * 1024;

/** What a pull would hand over for this message: its id and its frame, as an envelope of the
 *  floor's one sender. */
function frame(seq: number, channel: string, content: string, at: number) {
  const hex = seq.toString(16).padStart(32, '0');
  const message_id = `ocm_${hex}`;
  const envelope = {
    message_id,
    channel_id: `chn_${hex}`,
    sender_session_id: 'floor',
    sender_role: 'A',
    recipient_session_id: 'reader',
    recipient_role: 'B',
    message_type: 'manual' as const,
    content,
    reply_to: null,
    hop_count: 0,
    correlation_id: `cor_${hex}`,
    root_message_id: null,
    ...acceptedEnvelope(at),
  };
  return { message_id, framed: frameEnvelope(envelope, channel) };
}

/** The last `limit` lines of the file, reading 64 KiB blocks from its end until enough are seen. */
function lastLines(limit: number): string[] {
  const fd = openSync(file, 'r');
  try {
    let end = fstatSync(fd).size;
    let tail = Buffer.alloc(0);
    let newlines = 0;
    while (end > 0 && newlines <= limit) {
      const start = Math.max(0, end - CHUNK);
      const block = Buffer.alloc(end - start);
      readSync(fd, block, 0, block.length, start);
      for (const b of block) if (b === 0x0a) newlines++;
      tail = Buffer.concat([block, tail]);
      end = start;
    }
    return tail.toString('utf8').trimEnd().split('\n').slice(-limit);
  } finally {
    closeSync(fd);
  }
}
server.registerTool(
  'send',
  { description: 'Append a message.', inputSchema: { channel: z.string(), content: z.string() } },
  async ({ channel, content }) => {
    const id = `m${++n}`;
    const at = Date.now();
    if (db) {
      await db.query({
        name: 'send',
        text: `insert into ${table} (channel, body) values ($1, $2)`,
        values: [channel, JSON.stringify({ id, channel, content, at })],
      });
      return {
        content: [
          { type: 'text', text: JSON.stringify({ ok: true, message: 'Queued.', data: { message_ids: [id] } }) },
        ],
      };
    }
    const line = framed
      ? { id, channel, content, at, ...frame(n, channel, content, at) }
      : { id, channel, content, at };
    appendFileSync(file, `${JSON.stringify(line)}\n`);
    return {
      content: [{ type: 'text', text: JSON.stringify({ ok: true, message: 'Queued.', data: { message_ids: [id] } }) }],
    };
  },
);
type Line = { id: string; channel: string; content: string; at: number; message_id?: string; framed?: string };
/** Taken by an earlier read, not answered yet (it did not fit that read's answer), oldest first. */
let pending: Line[] = [];

/** What one entry of the answer counts against max_size (AnswerRoom, as a pull counts a frame):
 *  its frame, or the floor's plain line by the same rule. */
const entryText = (m: Line) => m.framed ?? JSON.stringify(m);

server.registerTool(
  'read',
  {
    description: 'The last messages.',
    inputSchema: { limit: z.number(), max_size: z.number().optional() },
  },
  async ({ limit, max_size }) => {
    if (!pending.length) {
      const taken: Line[] = db
        ? (
            await db.query<{ n: string; body: string }>({
              name: 'read',
              text: `delete from ${table} where n in (select n from ${table} order by n desc limit $1) returning n, body::text`,
              values: [limit],
            })
          ).rows
            .sort((a, b) => Number(a.n) - Number(b.n))
            .map((r) => {
              const m = JSON.parse(r.body) as Line;
              return { ...m, ...frame(Number(r.n), m.channel, m.content, m.at) };
            })
        : lastLines(limit).map((l) => JSON.parse(l) as Line);
      pending = taken;
    }
    const room = new AnswerRoom(max_size);
    const cut = pending.slice(0, limit).findIndex((m) => !room.take(entryText(m)));
    const fit = cut < 0 ? Math.min(limit, pending.length) : cut;
    const messages = pending.slice(0, fit);
    pending = pending.slice(fit);
    const more = pending.length > 0;
    const data =
      framed || db
        ? {
            messages: messages.map((m) => ({ channel: m.channel, message_id: m.message_id, framed: m.framed })),
            message_ids: messages.map((m) => m.message_id),
            untrusted_notice: UNTRUSTED_NOTICE,
            remaining: pending.length,
            ...(more ? { more_than_fits: true } : {}),
          }
        : max_size === undefined
          ? { messages }
          : { messages, remaining: pending.length, ...(more ? { more_than_fits: true } : {}) };
    return {
      content: [{ type: 'text', text: JSON.stringify({ ok: true, message: `${messages.length} message(s).`, data }) }],
    };
  },
);
await server.connect(new LineLimitedStdioTransport(process.stdin, process.stdout));
