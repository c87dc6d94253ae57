// Fake OpenAI Chat Completions API (for OpenCode's `@ai-sdk/openai-compatible` provider):
// POST /v1/chat/completions, SSE `data: <chunk>\n\n` lines ending with `data: [DONE]`, plus a
// final usage chunk (OpenCode asks for `stream_options.include_usage`); JSON when `stream` is false.
// `opencode run "text"` sends the prompt JSON-quoted (`"\"text\""`): user texts are unquoted here.
import type http from 'node:http';
import { json, sse, startFake, textOf } from './script.ts';
import type { Action, FakeServer, ModelRequest, Script } from './script.ts';

const unquote = (t: string): string => {
  if (/^"[\s\S]*"$/.test(t)) {
    try {
      const v = JSON.parse(t);
      if (typeof v === 'string') return v;
    } catch {
      // not a JSON string: keep as is
    }
  }
  return t;
};

function parse(req: ModelRequest): void {
  const b = req.body;
  const msgs: any[] = Array.isArray(b.messages) ? b.messages : [];
  const system: string[] = [];
  for (const m of msgs) {
    if (m.role === 'system' || m.role === 'developer') system.push(textOf(m.content));
    else if (m.role === 'user') req.userTexts.push(unquote(textOf(m.content)));
    else if (m.role === 'tool') req.toolResults.push({ id: m.tool_call_id, text: textOf(m.content) });
  }
  req.system = system.join('\n');
  req.endsWithToolResult = msgs.at(-1)?.role === 'tool';
  req.tools = (Array.isArray(b.tools) ? b.tools : []).map((t: any) => String(t.function?.name ?? t.name));
  // OpenCode's title generation: a tool-less request whose system prompt asks for a title.
  req.aux = req.tools.length === 0 && /title/i.test(req.system);
}

function reply(req: ModelRequest, action: Action, res: http.ServerResponse, n: number): void {
  const id = `chatcmpl-fake-${n}`,
    created = Math.floor(Date.now() / 1000),
    model = req.body.model ?? 'fake-model';
  const chunk = (delta: object, finish_reason: string | null = null) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason }],
  });
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  const args = action.kind === 'call' ? JSON.stringify(action.args) : '';
  if (req.body.stream !== true) {
    const message =
      action.kind === 'call'
        ? {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: `call_fake_${n}`, type: 'function', function: { name: action.name, arguments: args } }],
          }
        : { role: 'assistant', content: action.text };
    json(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message, finish_reason: action.kind === 'call' ? 'tool_calls' : 'stop' }],
      usage,
    });
    return;
  }
  const out =
    action.kind === 'call'
      ? [
          chunk({
            role: 'assistant',
            content: null,
            tool_calls: [
              { index: 0, id: `call_fake_${n}`, type: 'function', function: { name: action.name, arguments: '' } },
            ],
          }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: args } }] }),
          chunk({}, 'tool_calls'),
        ]
      : [chunk({ role: 'assistant', content: action.text }), chunk({}, 'stop')];
  sse(res);
  for (const c of out) res.write(`data: ${JSON.stringify(c)}\n\n`);
  res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage })}\n\n`);
  res.end('data: [DONE]\n\n');
}

/** OpenCode `options.baseURL` is `${server.url}/v1`. */
export function startFakeOpenAIChat(script?: Script): Promise<FakeServer> {
  return startFake('chat', script, {
    isModelPath: (p) => p.endsWith('/chat/completions'),
    parse,
    reply,
    auxText: 'Fake title',
    other(req, res) {
      if (req.method === 'GET' && req.url.split('?')[0].endsWith('/models'))
        return json(res, 200, { object: 'list', data: [{ id: 'fake-model', object: 'model' }] });
      json(res, 404, { error: { message: `fake: no route ${req.method} ${req.url}` } });
    },
  });
}
