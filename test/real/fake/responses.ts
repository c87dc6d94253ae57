// Fake OpenAI Responses API (for Codex, which no longer speaks Chat Completions): POST /v1/responses,
// always answered as SSE (`event: <type>\ndata: {type, sequence_number, …}`): response.created,
// per item response.output_item.added / *.delta / response.output_item.done, response.completed.
// Codex offers MCP tools as a namespace (`{type:'namespace', name:'mcp__toy', tools:[…]}`); a
// `CALL mcp__toy__echo {…}` line becomes a function_call with `namespace:'mcp__toy', name:'echo'`
// (the flat name is rejected by Codex as "unsupported call").
import type http from 'node:http';
import { json, sse, startFake, textOf } from './script.ts';
import type { Action, FakeServer, ModelRequest, Script } from './script.ts';

function parse(req: ModelRequest): void {
  const b = req.body;
  const input: any[] = Array.isArray(b.input)
    ? b.input
    : [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: String(b.input ?? '') }] }];
  const system: string[] = typeof b.instructions === 'string' && b.instructions ? [b.instructions] : [];
  for (const it of input) {
    const type = it.type ?? 'message';
    if (type === 'message' && (it.role === 'developer' || it.role === 'system')) system.push(textOf(it.content));
    else if (type === 'message' && it.role === 'user') req.userTexts.push(textOf(it.content));
    else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      req.toolResults.push({
        id: it.call_id,
        text: typeof it.output === 'string' ? it.output : textOf(it.output) || JSON.stringify(it.output),
      });
    }
  }
  req.system = system.join('\n');
  const lastType = input.at(-1)?.type;
  req.endsWithToolResult = lastType === 'function_call_output' || lastType === 'custom_tool_call_output';
  for (const t of Array.isArray(b.tools) ? b.tools : []) {
    if (t.type === 'namespace') for (const f of t.tools ?? []) req.tools.push(`${t.name}__${f.name}`);
    else req.tools.push(String(t.name ?? t.type));
  }
  req.aux = req.tools.length === 0;
}

function reply(req: ModelRequest, action: Action, res: http.ServerResponse, n: number): void {
  let item: any;
  if (action.kind === 'call') {
    const offered: any[] = Array.isArray(req.body.tools) ? req.body.tools : [];
    const flat = offered.some((t) => t.type !== 'namespace' && t.name === action.name);
    const ns = flat ? undefined : offered.find((t) => t.type === 'namespace' && action.name.startsWith(`${t.name}__`));
    item = {
      type: 'function_call',
      id: `fc_fake_${n}`,
      call_id: `call_fake_${n}`,
      arguments: JSON.stringify(action.args),
      status: 'completed',
      ...(ns ? { namespace: ns.name, name: action.name.slice(ns.name.length + 2) } : { name: action.name }),
    };
  } else {
    item = {
      type: 'message',
      id: `msg_fake_${n}`,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: action.text, annotations: [] }],
    };
  }
  const usage = {
    input_tokens: 100,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 10,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 110,
  };
  const response = {
    id: `resp_fake_${n}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'in_progress',
    model: req.body.model ?? 'fake',
    output: [] as any[],
  };
  if (req.body.stream === false) {
    json(res, 200, { ...response, status: 'completed', output: [item], usage });
    return;
  }
  sse(res);
  let seq = 0;
  const ev = (type: string, data: object) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
  ev('response.created', { response });
  if (item.type === 'message') {
    ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
    ev('response.output_text.delta', {
      output_index: 0,
      item_id: item.id,
      content_index: 0,
      delta: item.content[0].text,
    });
  } else {
    ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', arguments: '' } });
    ev('response.function_call_arguments.delta', { output_index: 0, item_id: item.id, delta: item.arguments });
  }
  ev('response.output_item.done', { output_index: 0, item });
  ev('response.completed', { response: { ...response, status: 'completed', output: [item], usage } });
  res.end();
}

/** Codex `base_url` is `${server.url}/v1`. */
export function startFakeResponses(script?: Script): Promise<FakeServer> {
  return startFake('responses', script, {
    isModelPath: (p) => p.endsWith('/responses'),
    parse,
    reply,
    auxText: 'Fake title',
    other(req, res) {
      if (req.method === 'GET' && req.url.split('?')[0].endsWith('/models'))
        return json(res, 200, { object: 'list', data: [{ id: 'fake-model', object: 'model' }], models: [] });
      json(res, 404, { error: { message: `fake: no route ${req.method} ${req.url}` } });
    },
  });
}
