// Generated MCP frames for the frame fuzz (issue 8, Prove 2): each frame is the bytes of one line
// (without its terminator) and what the server must answer. Only frames that must be refused, or
// that only read, are generated, so the project's files must end byte-identical.
import fc from 'fast-check';
import type * as z from 'zod';
import { toolsFor, type ToolDef } from '../../adapters/tools.ts';
import { MCP_MAX_FRAME_BYTES } from '../../src/protocol/limits.ts';

export type Expect =
  /** Garbage: only the global rules apply (no exit, no internal error, no stack, JSON only). */
  | { kind: 'any' }
  /** A JSON-RPC error with this code, answered to `id` (null: answered with id null). */
  | { kind: 'rpc_error'; id: string | null; code: number }
  /** A tool result refusing with this reason. */
  | { kind: 'refusal'; id: string; reason: string }
  /** A successful answer (ping, tools/list, a read-only tool call). */
  | { kind: 'result'; id: string };

export interface Frame {
  bytes: Buffer;
  expect: Expect;
  label: string;
}

export const INVALID_PARAMS = -32602;
export const PARSE_ERROR = -32700;

/** Everything the fuzzed project holds (set up by the test before the server starts). */
export interface Fixture {
  /** A channel the pinned member is on with one peer. */
  channel: string;
  peerRole: string;
  ownRole: string;
  /** A message id that exists on `channel`. */
  messageId: string;
  /** A saved channel the pinned member was in. */
  archived: string;
}

const tools = toolsFor('mcp', false);
const toolNames = tools.map((t) => t.name);

// ---- JSON types of each tool argument, read from the zod shapes ------------------------------------

export type JsonType = 'string' | 'number' | 'boolean';
export interface Field {
  type: JsonType;
  nullable: boolean;
}

function fieldOf(schema: z.ZodType): Field {
  let s = schema as unknown as { _zod: { def: { type: string; innerType?: unknown } } };
  let nullable = false;
  while (s._zod.def.type === 'optional' || s._zod.def.type === 'nullable') {
    if (s._zod.def.type === 'nullable') nullable = true;
    s = s._zod.def.innerType as typeof s;
  }
  return { type: s._zod.def.type as JsonType, nullable };
}

export const fieldsOf = (t: ToolDef): Record<string, Field> =>
  Object.fromEntries(Object.entries(t.shape).map(([k, s]) => [k, fieldOf(s as z.ZodType)]));

// ---- building blocks --------------------------------------------------------------------------------

/** Argument names a caller might hope would choose an identity: never obeyed, always dropped. */
export const IDENTITY_KEYS = [
  'session_id',
  'sender_session_id',
  'sender',
  'from',
  'as',
  'member_id',
  'pin',
  'caller',
  'identity',
  'sid',
  'actor',
  'OPENCOMMS_MEMBER_ID',
  'host_session_id',
  'sender_role',
  'operator',
  'role_override',
  '__proto__',
  'constructor',
];

const deep = (depth: number, open: string, close: string, leaf = '1') =>
  `${open.repeat(depth)}${leaf}${close.repeat(depth)}`;

/** JSON text of values that break a field of type `f` (always a JSON type the field refuses). */
function wrongValue(f: Field): fc.Arbitrary<string> {
  const all: Array<[JsonType | 'null' | 'array' | 'object', fc.Arbitrary<string>]> = [
    ['string', fc.string({ maxLength: 40 }).map((s) => JSON.stringify(s))],
    ['number', fc.oneof(fc.integer().map(String), fc.constantFrom('1e308', '-1e308', '0.5', '-0', '9007199254740993'))],
    ['boolean', fc.boolean().map(String)],
    ['null', fc.constant('null')],
    [
      'array',
      fc.oneof(
        fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify([v])),
        fc.integer({ min: 100, max: 20_000 }).map((d) => deep(d, '[', ']')),
      ),
    ],
    [
      'object',
      fc.oneof(
        fc
          .dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })
          .map((o) => JSON.stringify(o)),
        fc.integer({ min: 100, max: 20_000 }).map((d) => deep(d, '{"a":', '}')),
      ),
    ],
  ];
  return fc.oneof(...all.filter(([t]) => t !== f.type && !(t === 'null' && f.nullable)).map(([, a]) => a));
}

/** A value of the right JSON type (its content may still be refused by the engine). */
function rightValue(f: Field): fc.Arbitrary<string> {
  if (f.type === 'string') return fc.string({ maxLength: 30 }).map((s) => JSON.stringify(s));
  if (f.type === 'number') return fc.integer({ min: -5, max: 5 }).map(String);
  return fc.boolean().map(String);
}

const objectText = (entries: Array<[string, string]>) =>
  `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;

const call = (id: string, name: string, argsText: string) =>
  `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"tools/call","params":{"name":${JSON.stringify(name)},"arguments":${argsText}}}`;

const frame = (text: string | Buffer, expect: Expect, label: string): Frame => ({
  bytes: typeof text === 'string' ? Buffer.from(text, 'utf8') : text,
  expect,
  label,
});

// ---- frame kinds ----------------------------------------------------------------------------------------

/** A tool call with one argument of a wrong JSON type (or a required one missing), plus extra and
 *  identity-like fields: -32602 before anything runs. */
const wrongTypedCall = (id: string) =>
  fc
    .constantFrom(...tools)
    .chain((t) => {
      const fields = fieldsOf(t);
      const names = Object.keys(fields);
      return fc.record({
        t: fc.constant(t),
        broken: fc.constantFrom(...names),
        missing: fc.boolean(),
        values: fc.tuple(...names.map((n) => rightValue(fields[n]!))),
        wrong: fc.constantFrom(...names).chain((n) => wrongValue(fields[n]!).map((v) => [n, v] as const)),
        extra: fc.array(
          fc.tuple(
            fc.oneof(fc.constantFrom(...IDENTITY_KEYS), fc.string({ maxLength: 12 })),
            fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
          ),
          { maxLength: 4 },
        ),
      });
    })
    .filter(({ t, missing, broken }) => !missing || t.required.includes(broken))
    .map(({ t, broken, missing, values, wrong, extra }) => {
      const names = Object.keys(t.shape);
      const known = new Set(names);
      const entries: Array<[string, string]> = names.map((n, i) => [n, values[i]!]);
      const args = missing
        ? entries.filter(([n]) => n !== broken)
        : entries.map(([n, v]): [string, string] => (n === wrong[0] ? [n, wrong[1]] : [n, v]));
      // Extra keys that collide with a known argument would change what is being tested.
      const extras = extra.filter(([k]) => !known.has(k));
      return frame(
        call(id, t.name, objectText([...args, ...extras])),
        { kind: 'rpc_error', id, code: INVALID_PARAMS },
        missing ? `${t.name} without ${broken}` : `${t.name} with ${wrong[0]} of a wrong type`,
      );
    });

/** tools/call whose params break the request's own shape (arguments not an object, name not a
 *  string, no params): invalid params, never an internal error. */
const malformedCall = (id: string) =>
  fc
    .oneof(
      wrongValue({ type: 'boolean', nullable: false })
        .filter((v) => !v.startsWith('{'))
        .map((a) => `{"name":"opencomms_status","arguments":${a}}`),
      wrongValue({ type: 'string', nullable: false }).map((n) => `{"name":${n},"arguments":{}}`),
      fc.constantFrom('{}', '{"arguments":{}}', ''),
    )
    .map((params) => {
      const text = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"tools/call"${params ? `,"params":${params}` : ''}}`;
      return frame(
        text,
        { kind: 'rpc_error', id, code: INVALID_PARAMS },
        `tools/call params ${params.slice(0, 60) || '(none)'}`,
      );
    });

/** Unknown or unlisted tools: -32602. */
const unknownTool = (id: string) =>
  fc
    .oneof(
      fc.constant('opencomms_kick'),
      fc.string({ maxLength: 30 }).filter((n) => !toolNames.includes(n)),
      fc.constantFrom(...toolNames).map((n) => n.toUpperCase()),
    )
    .map((name) =>
      frame(
        call(id, name, '{"channel":"x"}'),
        { kind: 'rpc_error', id, code: INVALID_PARAMS },
        `unknown tool ${name.slice(0, 40)}`,
      ),
    );

/** Right types, refused by the engine: a ToolResult refusal and no write. */
function semanticRefusals(fx: Fixture) {
  const missing = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,20}$/).map((n) => `nope-${n}`);
  const text = fc.string({ minLength: 1, maxLength: 60 }).filter((s) => s.trim() !== '');
  const cases: Array<fc.Arbitrary<[string, Record<string, unknown>, string]>> = [
    fc
      .constantFrom('', '   ', '\n\t')
      .map((c) => ['opencomms_send', { channel: fx.channel, content: c }, 'content_empty']),
    text.map((c) => ['opencomms_send', { channel: fx.channel, content: c, type: 'system' }, 'invalid_message_type']),
    fc
      .tuple(
        text,
        fc.string({ maxLength: 60 }).filter((r) => !/^ocm_[0-9a-f]{32}$/.test(r) && r !== ''),
      )
      .map(([c, r]) => ['opencomms_send', { channel: fx.channel, content: c, reply_to: r }, 'invalid_argument']),
    text.map((c) => ['opencomms_send', { channel: fx.channel, content: c, to: fx.ownRole }, 'recipient_not_found']),
    text.map((c) => [
      'opencomms_send',
      { channel: fx.channel, content: c, to: fx.peerRole, broadcast: true },
      'invalid_argument',
    ]),
    fc.constant(['opencomms_send', { channel: fx.channel, content: 'x'.repeat(100_001) }, 'content_too_large']),
    fc.tuple(missing, text).map(([ch, c]) => ['opencomms_send', { channel: ch, content: c }, 'channel_not_found']),
    fc.constant(['opencomms_create', { channel: fx.channel, role: 'Zed', role_prompt: 'p' }, 'channel_exists']),
    fc
      .string({ minLength: 1, maxLength: 20 })
      .filter((n) => !/^[a-z0-9][a-z0-9_-]*$/.test(n.trim().toLowerCase()))
      .map((n) => ['opencomms_create', { channel: n, role: 'Zed', role_prompt: 'p' }, 'invalid_channel_name']),
    fc.constant(['opencomms_join', { channel: fx.channel, role: 'Zed', role_prompt: 'p' }, 'already_member']),
    missing.map((ch) => ['opencomms_join', { channel: ch, role: 'Zed', role_prompt: 'p' }, 'channel_not_found']),
    fc
      .constantFrom('9lives', '', 'a/b', 'x'.repeat(33), 'Role\u200b')
      .map((r) => ['opencomms_join', { channel: fx.channel, role: r, role_prompt: 'p' }, 'invalid_role']),
    fc
      .tuple(
        fc.constantFrom(
          'opencomms_pause',
          'opencomms_resume',
          'opencomms_disconnect',
          'opencomms_inbox',
          'opencomms_history',
        ),
        missing,
      )
      .map(([t, ch]) => [t, { channel: ch }, 'channel_not_found']),
    fc
      .constantFrom('', '   ')
      .map((p) => ['opencomms_update_role', { channel: fx.channel, role_prompt: p }, 'role_prompt_required']),
    fc
      .string({ maxLength: 12 })
      .filter(
        (a) =>
          !['start', 'stop', 'switch', 'reset', 'status', 'set_limit', 'clear_limit'].includes(a.trim().toLowerCase()),
      )
      .map((a) => ['opencomms_timer', { channel: fx.channel, action: a }, 'invalid_timer_action']),
    fc
      .constantFrom(0, -1, -1e308)
      .map((l) => ['opencomms_timer', { channel: fx.channel, action: 'set_limit', limit_ms: l }, 'invalid_limit']),
    fc.constant(['opencomms_save_session', { channel: fx.channel, summary: 's'.repeat(2001) }, 'summary_too_large']),
    missing.map((ch) => ['opencomms_resume_session', { channel: ch }, 'archive_not_found']),
    fc.constant(['opencomms_delete_session', { channel: fx.channel, confirm: false }, 'confirm_required']),
    missing.map((ch) => ['opencomms_archive', { channel: ch, mode: 'summary' }, 'archive_not_found']),
  ];
  return (id: string) =>
    fc
      .oneof(...cases)
      .map(([name, args, reason]) =>
        frame(call(id, name, JSON.stringify(args)), { kind: 'refusal', id, reason }, `${name} → ${reason}`),
      );
}

/** Calls that only read, with extra and identity-like fields: answered, nothing written. */
function readOnly(fx: Fixture) {
  const extra = fc.dictionary(fc.constantFrom(...IDENTITY_KEYS, 'x', 'verbose'), fc.jsonValue({ maxDepth: 2 }), {
    maxKeys: 3,
  });
  const limit = fc.oneof(fc.integer({ min: -10, max: 1000 }), fc.constantFrom(1e308, -0, 0.5));
  return (id: string) =>
    fc
      .oneof(
        fc.tuple(
          fc.constant('opencomms_status'),
          fc.record({ channel: fc.constantFrom(fx.channel, 'unknown-channel') }, { requiredKeys: [] }),
        ),
        fc.tuple(
          fc.constant('opencomms_inbox'),
          fc.record({ channel: fc.constant(fx.channel), limit }, { requiredKeys: ['channel'] }),
        ),
        fc.tuple(
          fc.constant('opencomms_history'),
          fc.record({ channel: fc.constant(fx.channel), limit }, { requiredKeys: ['channel'] }),
        ),
        fc.tuple(
          fc.constant('opencomms_archive'),
          fc.record(
            { mode: fc.constantFrom('list', 'summary', 'messages'), channel: fc.constant(fx.archived), limit },
            { requiredKeys: ['mode', 'channel'] },
          ),
        ),
      )
      .chain(([name, args]) =>
        extra.map((e) =>
          frame(call(id, name, JSON.stringify({ ...e, ...args })), { kind: 'result', id }, `${name} (read)`),
        ),
      );
}

/** Shapes JSON-RPC does not allow (wrong version, id types, methods, batches, responses): an
 *  error or silence, never a tool run. */
const wrongShape = fc
  .record(
    {
      jsonrpc: fc.constantFrom('2.0', '1.0', 2, null),
      id: fc.oneof(
        fc.integer(),
        fc.string({ maxLength: 10 }),
        fc.constant(null),
        fc.jsonValue({ maxDepth: 2 }),
        fc.double(),
      ),
      method: fc.oneof(
        fc.constantFrom(
          'ping',
          'tools/list',
          'notifications/initialized',
          'notifications/cancelled',
          'resources/list',
          'prompts/get',
          'logging/setLevel',
          'completion/complete',
          'initialize',
        ),
        fc.string({ maxLength: 20 }),
        fc.integer(),
      ),
      params: fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constant(undefined)),
      result: fc.jsonValue({ maxDepth: 2 }),
      error: fc.jsonValue({ maxDepth: 2 }),
    },
    { requiredKeys: [] },
  )
  .chain((o) => fc.oneof(fc.constant(JSON.stringify(o)), fc.constant(JSON.stringify([o, o])), fc.constant('[]')))
  .map((text) => frame(text, { kind: 'any' }, 'wrong JSON-RPC shape'));

/** Not JSON, or not UTF-8: random text, truncated requests, raw invalid byte sequences. */
const INVALID_UTF8 = [
  [0xff],
  [0xfe, 0xff],
  [0xc3],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xe2, 0x82],
  [0x80],
];
const notJson = fc.oneof(
  fc
    .string({ unit: 'binary', maxLength: 200 })
    .filter((s) => !s.includes('\n'))
    .map((s) => frame(s, { kind: 'any' }, 'random text')),
  fc.tuple(fc.constantFrom(...toolNames), fc.nat()).map(([name, cut]) => {
    const full = call('cut', name, '{"channel":"x"}');
    return frame(
      full.slice(0, 1 + (cut % (full.length - 1))),
      { kind: 'rpc_error', id: null, code: PARSE_ERROR },
      'truncated request',
    );
  }),
  fc
    .tuple(
      fc.constantFrom(...INVALID_UTF8),
      fc.string({ maxLength: 20 }).filter((s) => !s.includes('\n')),
    )
    .map(([bad, s]) =>
      frame(Buffer.concat([Buffer.from(s), Buffer.from(bad), Buffer.from(s)]), { kind: 'any' }, 'invalid UTF-8'),
    ),
  // Invalid UTF-8 inside a JSON string of a valid ping: decoded as U+FFFD, then answered.
  fc
    .constantFrom(...INVALID_UTF8)
    .map((bad) =>
      frame(
        Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":"u8-'), Buffer.from(bad), Buffer.from('","method":"ping"}')]),
        { kind: 'any' },
        'invalid UTF-8 in an id',
      ),
    ),
);

/** Ids JSON allows but nobody expects: huge numbers, long strings, escapes and lone surrogates. */
const hugeIds = (id: string) =>
  fc
    .oneof(
      fc.constantFrom('1e308', '-1e308', '9007199254740993', '1.5', '-0', '0', '123456789012345678901234567890'),
      fc.integer({ min: 1000, max: 300_000 }).map((n) => JSON.stringify(`${id}-${'i'.repeat(n)}`)),
      fc.constantFrom('"\\u0000"', '"\\ud800"', '"\\udfff\\ud800"', '"<<<END_UNTRUSTED_PEER_MESSAGE>>>"'),
    )
    .map((raw) =>
      frame(`{"jsonrpc":"2.0","id":${raw},"method":"ping"}`, { kind: 'any' }, `ping with id ${raw.slice(0, 30)}`),
    );

/** Deep nesting in every position a request can hold a value. */
const deepNesting = (id: string) =>
  fc
    .tuple(fc.integer({ min: 1000, max: 100_000 }), fc.constantFrom('params', 'meta', 'argument', 'extra', 'id'))
    .map(([d, where]) => {
      const v = deep(d, '[', ']');
      const o = deep(d, '{"a":', '}');
      switch (where) {
        case 'params':
          return frame(
            `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"ping","params":${v}}`,
            { kind: 'any' },
            `params nested ${d}`,
          );
        case 'meta':
          return frame(
            `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"ping","params":{"_meta":${o}}}`,
            { kind: 'any' },
            `_meta nested ${d}`,
          );
        case 'argument':
          return frame(
            call(id, 'opencomms_status', `{"channel":${v}}`),
            { kind: 'rpc_error', id, code: INVALID_PARAMS },
            `argument nested ${d}`,
          );
        case 'extra':
          return frame(call(id, 'opencomms_status', `{"x":${o}}`), { kind: 'result', id }, `extra field nested ${d}`);
        default:
          return frame(`{"jsonrpc":"2.0","id":${o},"method":"ping"}`, { kind: 'any' }, `id nested ${d}`);
      }
    });

/** A read-only call padded to exactly `bytes` UTF-8 bytes with characters of `width` bytes. */
export function sizedCall(id: string, bytes: number, ch: string): Buffer {
  const pre = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"tools/call","params":{"name":"opencomms_status","arguments":{"pad":"`;
  const post = '"}}}';
  const room = bytes - Buffer.byteLength(pre + post);
  const w = Buffer.byteLength(ch);
  const line = Buffer.from(pre + 'a'.repeat(room % w) + ch.repeat(Math.floor(room / w)) + post, 'utf8');
  if (line.length !== bytes) throw new Error(`sized call is ${line.length} bytes, wanted ${bytes}`);
  return line;
}

/** Lines of exactly 1 MiB (answered) and 1 MiB + 1 (-32700 with the id), in 1-, 2-, 3- and
 *  4-byte characters. */
export function sizeFrames(prefix: string): Frame[] {
  return ['a', 'é', '€', '😀'].flatMap((ch, i) => [
    frame(
      sizedCall(`${prefix}-fit-${i}`, MCP_MAX_FRAME_BYTES, ch),
      { kind: 'result', id: `${prefix}-fit-${i}` },
      `exactly ${MCP_MAX_FRAME_BYTES} bytes of ${ch}`,
    ),
    frame(
      sizedCall(`${prefix}-over-${i}`, MCP_MAX_FRAME_BYTES + 1, ch),
      { kind: 'rpc_error', id: `${prefix}-over-${i}`, code: PARSE_ERROR },
      `${MCP_MAX_FRAME_BYTES + 1} bytes of ${ch}`,
    ),
  ]);
}

/** One generated frame; `n` makes its id unique. Weights favour the cheap kinds. */
export function anyFrame(fx: Fixture): fc.Arbitrary<(n: number) => fc.Arbitrary<Frame>> {
  const refusal = semanticRefusals(fx);
  const read = readOnly(fx);
  const kinds: Array<{ weight: number; arbitrary: fc.Arbitrary<(n: number) => fc.Arbitrary<Frame>> }> = [
    { weight: 25, arbitrary: fc.constant((n) => wrongTypedCall(`wt-${n}`)) },
    { weight: 6, arbitrary: fc.constant((n) => malformedCall(`mc-${n}`)) },
    { weight: 5, arbitrary: fc.constant((n) => unknownTool(`ut-${n}`)) },
    { weight: 15, arbitrary: fc.constant((n) => refusal(`sr-${n}`)) },
    { weight: 10, arbitrary: fc.constant((n) => read(`ro-${n}`)) },
    { weight: 15, arbitrary: fc.constant(() => wrongShape) },
    { weight: 15, arbitrary: fc.constant(() => notJson) },
    { weight: 3, arbitrary: fc.constant((n) => hugeIds(`hi-${n}`)) },
    { weight: 1, arbitrary: fc.constant((n) => deepNesting(`dn-${n}`)) },
  ];
  return fc.oneof(...kinds);
}
