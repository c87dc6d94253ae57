// The floor the MCP figures are divided by: an MCP server with the same SDK and the same stdio
// transport as `opencomms mcp`, whose `send` appends one JSON line to a file and whose `read`
// returns the last lines, read backwards from the end (so a read costs what it returns, not the
// file's length, as OpenComms' reads do). Whatever OpenComms costs beyond this is its own.
//   node floor-server.mjs <dir>
import { appendFileSync, closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import * as z from 'zod';
import { LineLimitedStdioTransport } from '../adapters/mcp/transport.ts';

const file = join(process.argv[2] ?? '.', 'floor.jsonl');
const server = new McpServer({ name: 'floor', version: '1.0.0' }, { capabilities: { tools: {} } });
let n = 0;

const CHUNK = 64 * 1024;

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
server.registerTool('send', { description: 'Append a message.', inputSchema: { channel: z.string(), content: z.string() } }, async ({ channel, content }) => {
  const id = `m${++n}`;
  appendFileSync(file, `${JSON.stringify({ id, channel, content, at: Date.now() })}\n`);
  return { content: [{ type: 'text', text: JSON.stringify({ ok: true, message: 'Queued.', data: { message_ids: [id] } }) }] };
});
server.registerTool('read', { description: 'The last messages.', inputSchema: { limit: z.number() } }, async ({ limit }) => {
  const lines = lastLines(limit);
  const messages = lines.map((l) => JSON.parse(l) as { id: string; content: string });
  return { content: [{ type: 'text', text: JSON.stringify({ ok: true, message: `${messages.length} message(s).`, data: { messages } }) }] };
});
await server.connect(new LineLimitedStdioTransport(process.stdin, process.stdout));
