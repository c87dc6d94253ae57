// The fake model servers on their own (no client binary): script lines, conversations by marker,
// the echo fallback, and the wire shapes each client needs.
import { afterEach, describe, expect, it } from 'vitest';
import { parseLine, startFakeAnthropic, startFakeOpenAIChat, startFakeResponses } from './fake/index.ts';
import type { FakeServer } from './fake/index.ts';

const servers: FakeServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
const track = (s: FakeServer) => {
  servers.push(s);
  return s;
};

async function post(url: string, body: unknown): Promise<{ status: number; text: string }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  return { status: r.status, text: await r.text() };
}
/** The `data:` payloads of an SSE body (JSON-parsed, `[DONE]` dropped). */
const sseData = (text: string): any[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));

describe('script lines', () => {
  it('parses CALL and SAY, and rejects anything else', () => {
    expect(parseLine('CALL mcp__toy__echo {"text":"x"}')).toEqual({
      kind: 'call',
      name: 'mcp__toy__echo',
      args: { text: 'x' },
    });
    expect(parseLine('CALL ping')).toEqual({ kind: 'call', name: 'ping', args: {} });
    expect(parseLine('SAY hello  world')).toEqual({ kind: 'say', text: 'hello  world' });
    expect(parseLine('SAY multi\nline')).toEqual({ kind: 'say', text: 'multi\nline' });
    expect(() => parseLine('HELLO')).toThrow(/CALL or SAY/);
    expect(() => parseLine('CALL t {bad')).toThrow(/not JSON/);
  });

  it('DELAY <ms> delays the reply of the line it prefixes (a slow model), and times are recorded', async () => {
    expect(parseLine('DELAY 250 SAY slow')).toEqual({ kind: 'say', text: 'slow', delayMs: 250 });
    expect(parseLine('DELAY 10 CALL ping {"n":1}')).toEqual({
      kind: 'call',
      name: 'ping',
      args: { n: 1 },
      delayMs: 10,
    });
    expect(() => parseLine('DELAY x SAY no')).toThrow(/CALL or SAY/);
    const fake = track(await startFakeOpenAIChat(['DELAY 300 SAY slow', 'SAY fast']));
    const t0 = performance.now();
    const slow = await post(`${fake.url}/v1/chat/completions`, {
      model: 'm',
      messages: [{ role: 'user', content: 'a' }],
    });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect(JSON.parse(slow.text).choices[0].message.content).toBe('slow');
    const [r] = fake.turns();
    expect(r.repliedAt! - r.at).toBeGreaterThanOrEqual(290);
    const t1 = performance.now();
    await post(`${fake.url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'b' }] });
    expect(performance.now() - t1).toBeLessThan(290);
  });

  it('fails at start on a malformed static line', async () => {
    await expect(startFakeAnthropic(['SAY ok', 'OOPS'])).rejects.toThrow(/CALL or SAY/);
  });
});

describe('fake Anthropic Messages API', () => {
  it('streams a tool_use, then text; records tool results; keys conversations by marker', async () => {
    const fake = track(
      await startFakeAnthropic({ '[conv-B]': ['SAY I am B'], '*': ['CALL echo {"text":"x"}', 'SAY done'] }),
    );
    const tools = [{ name: 'echo', input_schema: { type: 'object' } }];
    const first = await post(`${fake.url}/v1/messages?beta=true`, {
      model: 'm',
      stream: true,
      system: [{ type: 'text', text: 'SYS' }],
      tools,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const ev = sseData(first.text);
    expect(ev.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(ev[1].content_block).toMatchObject({ type: 'tool_use', name: 'echo' });
    expect(JSON.parse(ev[2].delta.partial_json)).toEqual({ text: 'x' });
    expect(ev[4].delta.stop_reason).toBe('tool_use');

    const id = ev[1].content_block.id;
    const second = await post(`${fake.url}/v1/messages`, {
      model: 'm',
      tools,
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'tool_use', id, name: 'echo', input: { text: 'x' } }] },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: id, content: [{ type: 'text', text: 'echoed x' }] }],
        },
      ],
    });
    expect(JSON.parse(second.text)).toMatchObject({
      content: [{ type: 'text', text: 'done' }],
      stop_reason: 'end_turn',
    });

    const b = await post(`${fake.url}/v1/messages`, {
      model: 'm',
      tools,
      messages: [{ role: 'user', content: '[conv-B] who?' }],
    });
    expect(JSON.parse(b.text).content[0].text).toBe('I am B');
    // Used-up queue: echo fallback.
    const c = await post(`${fake.url}/v1/messages`, {
      model: 'm',
      tools,
      messages: [{ role: 'user', content: 'again' }],
    });
    expect(JSON.parse(c.text).content[0].text).toBe('echo: again');

    const turns = fake.turns();
    expect(turns.map((t) => t.conversation)).toEqual(['*', '*', '[conv-B]', '*']);
    expect(turns[0].system).toBe('SYS');
    expect(turns[1].toolResults).toEqual([{ id, text: 'echoed x', isError: false }]);
    expect(turns[1].endsWithToolResult).toBe(true);
    expect(turns[3].fallback).toBe(true);
    expect(fake.remaining()).toEqual({ '[conv-B]': 0, '*': 0 });
  });

  it('answers tool-less side requests without using a script line, and 404s unknown paths', async () => {
    const fake = track(await startFakeAnthropic(['SAY scripted']));
    const aux = await post(`${fake.url}/v1/messages`, { model: 'm', messages: [{ role: 'user', content: 'title?' }] });
    expect(JSON.parse(aux.text).content[0].text).toBe('Fake title');
    expect(fake.remaining()['*']).toBe(1);
    expect((await post(`${fake.url}/v1/nope`, {})).status).toBe(404);
    expect(JSON.parse((await post(`${fake.url}/v1/messages/count_tokens`, {})).text)).toEqual({ input_tokens: 100 });
  });
});

describe('fake Responses API', () => {
  it('puts a CALL into the offered MCP namespace, then reads the function_call_output', async () => {
    const fake = track(await startFakeResponses(['CALL mcp__toy__echo {"text":"x"}', 'SAY done']));
    const tools = [
      { type: 'function', name: 'exec_command' },
      { type: 'namespace', name: 'mcp__toy', tools: [{ type: 'function', name: 'echo' }] },
    ];
    const input = [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'DEV' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'go' }] },
    ];
    const ev = sseData((await post(`${fake.url}/v1/responses`, { model: 'm', stream: true, tools, input })).text);
    expect(ev.map((e) => e.type)).toEqual([
      'response.created',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.output_item.done',
      'response.completed',
    ]);
    const call = ev[3].item;
    expect(call).toMatchObject({
      type: 'function_call',
      namespace: 'mcp__toy',
      name: 'echo',
      arguments: '{"text":"x"}',
    });

    const ev2 = sseData(
      (
        await post(`${fake.url}/v1/responses`, {
          model: 'm',
          stream: true,
          tools,
          input: [
            ...input,
            {
              type: 'function_call',
              namespace: 'mcp__toy',
              name: 'echo',
              call_id: call.call_id,
              arguments: call.arguments,
            },
            { type: 'function_call_output', call_id: call.call_id, output: [{ type: 'input_text', text: 'echoed x' }] },
          ],
        })
      ).text,
    );
    expect(ev2.at(-1).response.output[0].content[0].text).toBe('done');
    const [t1, t2] = fake.turns();
    expect(t1.tools).toEqual(['exec_command', 'mcp__toy__echo']);
    expect(t1.system).toBe('DEV');
    expect(t2.toolResults).toEqual([{ id: call.call_id, text: 'echoed x' }]);
  });
});

describe('fake OpenAI Chat Completions API', () => {
  it('streams tool_calls then text with a usage chunk and [DONE]; unquotes JSON-quoted prompts; title requests are auxiliary', async () => {
    const fake = track(await startFakeOpenAIChat(['CALL toy_echo {"text":"x"}', 'SAY done']));
    const tools = [{ type: 'function', function: { name: 'toy_echo', parameters: { type: 'object' } } }];
    const title = await post(`${fake.url}/v1/chat/completions`, {
      model: 'm',
      stream: true,
      messages: [
        { role: 'system', content: 'You are a title generator.' },
        { role: 'user', content: 'x' },
      ],
    });
    expect(sseData(title.text)[0].choices[0].delta.content).toBe('Fake title');

    const r1 = await post(`${fake.url}/v1/chat/completions`, {
      model: 'm',
      stream: true,
      tools,
      messages: [
        { role: 'system', content: 'SYS' },
        { role: 'user', content: '"quoted prompt"' },
      ],
    });
    expect(r1.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    const c1 = sseData(r1.text);
    expect(c1[0].choices[0].delta.tool_calls[0].function.name).toBe('toy_echo');
    expect(c1[1].choices[0].delta.tool_calls[0].function.arguments).toBe('{"text":"x"}');
    expect(c1[2].choices[0].finish_reason).toBe('tool_calls');
    expect(c1.at(-1).usage).toBeDefined();
    const r2 = await post(`${fake.url}/v1/chat/completions`, {
      model: 'm',
      stream: false,
      tools,
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'toy_echo', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'echoed x' },
      ],
    });
    expect(JSON.parse(r2.text).choices[0].message.content).toBe('done');
    const turns = fake.turns();
    expect(turns[0].userTexts).toEqual(['quoted prompt']);
    expect(turns[1].toolResults).toEqual([{ id: 'c1', text: 'echoed x' }]);
    expect(fake.modelRequests().filter((r) => r.aux)).toHaveLength(1);
  });
});
