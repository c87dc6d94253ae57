// Fake Anthropic Messages API (for Claude Code): POST /v1/messages, SSE when `stream` is true.
// Event order, as Claude Code needs it: message_start, per block content_block_start /
// content_block_delta / content_block_stop, message_delta (stop_reason), message_stop.
import type http from 'node:http';
import { json, sse, startFake, textOf } from './script.ts';
import type { Action, FakeServer, ModelRequest, Script } from './script.ts';

const blocks = (c: unknown): any[] => (typeof c === 'string' ? [{ type: 'text', text: c }] : Array.isArray(c) ? c : []);

function parse(req: ModelRequest): void {
  const b = req.body;
  req.system = textOf(b.system);
  const msgs: any[] = Array.isArray(b.messages) ? b.messages : [];
  for (const m of msgs) {
    if (m.role !== 'user') continue;
    for (const bl of blocks(m.content)) {
      if (bl.type === 'text') req.userTexts.push(bl.text);
      else if (bl.type === 'tool_result') {
        // Claude Code appends a `<system-reminder>` text block inside the tool_result content:
        // `text` keeps only the tool's own output (the raw blocks stay in `body`).
        const own = blocks(bl.content).filter(
          (x) => !(x.type === 'text' && String(x.text).trimStart().startsWith('<system-reminder>')),
        );
        req.toolResults.push({ id: bl.tool_use_id, text: textOf(own), isError: bl.is_error === true });
      }
    }
  }
  const last = msgs.at(-1);
  req.endsWithToolResult = last?.role === 'user' && blocks(last.content).some((bl) => bl.type === 'tool_result');
  req.tools = (Array.isArray(b.tools) ? b.tools : []).map((t: any) => String(t.name));
  // Claude Code's side requests (titles, topic checks) carry no tools.
  req.aux = req.tools.length === 0;
}

function reply(req: ModelRequest, action: Action, res: http.ServerResponse, n: number): void {
  const content: any[] =
    action.kind === 'call'
      ? [{ type: 'tool_use', id: `toolu_fake_${n}`, name: action.name, input: action.args }]
      : [{ type: 'text', text: action.text }];
  const stop = action.kind === 'call' ? 'tool_use' : 'end_turn';
  const usage = { input_tokens: 100, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const message = {
    id: `msg_fake_${n}`,
    type: 'message',
    role: 'assistant',
    model: req.body.model ?? 'fake',
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage,
  };
  if (!req.body.stream) {
    json(res, 200, message);
    return;
  }
  sse(res);
  const ev = (type: string, data: object) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev('message_start', {
    message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } },
  });
  content.forEach((b, index) => {
    if (b.type === 'text') {
      ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
      ev('content_block_delta', { index, delta: { type: 'text_delta', text: b.text } });
    } else {
      ev('content_block_start', { index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
      ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
    }
    ev('content_block_stop', { index });
  });
  ev('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 10 } });
  ev('message_stop', {});
  res.end();
}

/** Base URL for `ANTHROPIC_BASE_URL` is `server.url`. */
export function startFakeAnthropic(script?: Script): Promise<FakeServer> {
  return startFake('anthropic', script, {
    isModelPath: (p) => p.endsWith('/v1/messages'),
    parse,
    reply,
    auxText: 'Fake title',
    other(req, res) {
      if (req.url.split('?')[0].endsWith('/v1/messages/count_tokens')) return json(res, 200, { input_tokens: 100 });
      json(res, 404, {
        type: 'error',
        error: { type: 'not_found_error', message: `fake: no route ${req.method} ${req.url}` },
      });
    },
  });
}
