// Helpers of the route-limit tests (`limits-*.test.ts`):
// messages carrying unique tokens at their start, middle and end; the OpenComms frames a model was
// shown, read from the requests the fake model server received (user and system texts, hook
// context, tool results — JSON tool results are read as the model reads them, string by string);
// a fake-model line that obeys OpenComms' own "… waiting … call opencomms_pull" line; and one
// check of the whole promise: every message reaches the model whole (alone, or as consecutive
// parts `| part: N of K |`), no frame the model saw is cut, only what it saw whole is marked
// delivered, nothing lost, nothing shown twice, in the order sent.
import type { ModelRequest } from './fake/index.ts';
import type { Peer } from './claude-harness.ts';

export const BEGIN = '<<<UNTRUSTED_PEER_MESSAGE>>>';
export const END = '<<<END_UNTRUSTED_PEER_MESSAGE>>>';

// ---- messages ---------------------------------------------------------------------------------------

const WORDS = (
  'route limit frame part host model review patch channel session message order budget token ' +
  'whole shown delivered pending wake hook pull context result parser config branch commit test ' +
  'naïve café déjà-vu façade 漢字 测试 データ 😀 🚀 résumé'
).split(' ');

function rng(seed: string): () => number {
  let h = 2166136261;
  for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return () => {
    h = Math.imul(h ^ (h >>> 15), 2246822507);
    h = Math.imul(h ^ (h >>> 13), 3266489909);
    h ^= h >>> 16;
    return (h >>> 0) / 4294967296;
  };
}

/** Filler text of exactly `n` UTF-16 units (words, a line break every dozen words, some
 *  multi-byte: é 2 bytes, 漢 3 bytes, 😀 4 bytes), never ending inside a surrogate pair. */
function filler(seed: string, n: number): string {
  const r = rng(seed);
  let s = '';
  let words = 0;
  while (s.length < n) {
    s += WORDS[Math.floor(r() * WORDS.length)]!;
    s += ++words % 12 === 0 ? '\n' : ' ';
  }
  s = s.slice(0, n);
  const last = s.charCodeAt(s.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) s = `${s.slice(0, -1)}x`;
  return s;
}

/** A message of exactly `length` UTF-16 units: `<TAG>-START`, `<TAG>-MIDDLE` at its middle and
 *  `<TAG>-END`, unique tokens, around filler text. */
export function makeMessage(tag: string, length: number): string {
  const start = `${tag}-START `;
  const mid = ` ${tag}-MIDDLE `;
  const end = ` ${tag}-END`;
  const room = length - start.length - mid.length - end.length;
  if (room < 0) throw new Error(`makeMessage: ${length} is too short for the tokens of ${tag}`);
  const a = Math.floor(room / 2);
  const text = start + filler(`${tag}a`, a) + mid + filler(`${tag}b`, room - a) + end;
  if (text.length !== length) throw new Error(`makeMessage: ${text.length} != ${length}`);
  return text;
}

export interface Sent {
  tag: string;
  text: string;
  /** The envelopes of this message for the one recipient, in order: one, or one per part. */
  ids: string[];
}

/** A peer send of `text` to the channel; the envelope ids as the send answers them (one per part
 *  when the message travels in parts). */
export async function sendMessage(peer: Peer, channel: string, tag: string, text: string): Promise<Sent> {
  const r = await peer.call('opencomms_send', { channel, content: text });
  if (!r.ok) throw new Error(`send ${tag}: ${r.message}`);
  const parts: string[] | undefined = r.data?.part_message_ids?.[0];
  return { tag, text, ids: parts?.length ? parts : [r.data.message_ids[0]] };
}

// ---- what the model was shown -----------------------------------------------------------------------

const textsOf = (c: unknown): string[] =>
  typeof c === 'string'
    ? [c]
    : Array.isArray(c)
      ? c.flatMap((b: any) =>
          typeof b === 'string'
            ? [b]
            : b?.type === 'tool_result'
              ? textsOf(b.content)
              : typeof b?.text === 'string'
                ? [b.text]
                : [],
        )
      : [];

/** Every text of a request the model reads, in order, with where it sits; the model's own turns
 *  (assistant messages, tool calls) left out. */
export function shownTexts(req: ModelRequest): Array<{ where: string; text: string }> {
  const out: Array<{ where: string; text: string }> = [];
  const b = req.body;
  if (req.api === 'anthropic') {
    for (const t of textsOf(b.system)) out.push({ where: 'system', text: t });
    (b.messages ?? []).forEach((m: any, i: number) => {
      if (m.role === 'assistant') return;
      const blocks = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (m.content ?? []);
      blocks.forEach((bl: any, j: number) => {
        const where = `messages[${i}].${bl.type}[${j}]`;
        for (const t of bl.type === 'tool_result' ? textsOf(bl.content) : textsOf([bl])) out.push({ where, text: t });
      });
    });
  } else if (req.api === 'responses') {
    if (typeof b.instructions === 'string') out.push({ where: 'instructions', text: b.instructions });
    (Array.isArray(b.input) ? b.input : []).forEach((it: any, i: number) => {
      const type = it.type ?? 'message';
      if (type === 'message' && it.role !== 'assistant')
        out.push({ where: `input[${i}].${it.role}`, text: textsOf(it.content).join('') });
      else if (type === 'function_call_output' || type === 'custom_tool_call_output')
        out.push({
          where: `input[${i}].${type}`,
          text: typeof it.output === 'string' ? it.output : textsOf(it.output).join(''),
        });
    });
  } else {
    (b.messages ?? []).forEach((m: any, i: number) => {
      if (m.role === 'assistant') return;
      out.push({ where: `messages[${i}].${m.role}`, text: textsOf(m.content).join('') });
    });
  }
  return out;
}

/** A text as the model reads it: a tool result holding JSON (after any prefix of the host's own,
 *  e.g. Codex's "Wall time: … Output:") is read string by string, as its escapes decode; anything
 *  else (a cut or moved JSON answer included) is read raw. */
function readable(text: string): string[] {
  const i = text.indexOf('{');
  if (i >= 0 && i < 200) {
    const j = text.lastIndexOf('}');
    try {
      const leaves: string[] = [];
      const walk = (v: unknown) => {
        if (typeof v === 'string') leaves.push(v);
        else if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === 'object') Object.values(v).forEach(walk);
      };
      walk(JSON.parse(text.slice(i, j + 1)));
      return [text.slice(0, i), ...leaves, text.slice(j + 1)];
    } catch {
      // not JSON, or cut: read raw
    }
  }
  return [text];
}

const HEADER = /\[OpenComms\] from [^\n]*?\| id: (ocm_[0-9a-f]+) \|(?: part: (\d+) of (\d+) \|)?[^\n]*/g;

export interface FrameSeen {
  id: string;
  part?: { n: number; of: number };
  /** The content between the markers, or null when the frame is not complete (a marker missing). */
  content: string | null;
  /** Shown characters of the frame after its header (up to the next header), for reports. */
  shownChars: number;
  req: number;
  where: string;
}

/** The frames in one text, each with its content when both markers follow its header. */
export function framesIn(text: string): Array<Omit<FrameSeen, 'req' | 'where'>> {
  const heads = [...text.matchAll(HEADER)];
  return heads.map((m, k) => {
    const from = m.index! + m[0].length;
    const until = k + 1 < heads.length ? heads[k + 1]!.index! : text.length;
    const after = text.slice(from, until);
    const open = `\n\n${BEGIN}\n`;
    const close = after.indexOf(`\n${END}`);
    const content = after.startsWith(open) && close >= open.length ? after.slice(open.length, close) : null;
    return {
      id: m[1]!,
      ...(m[2] ? { part: { n: Number(m[2]), of: Number(m[3]) } } : {}),
      content,
      shownChars: after.length,
    };
  });
}

/** Every frame of every request, in the order the model was shown them. */
export function framesSeen(reqs: ModelRequest[]): FrameSeen[] {
  return reqs.flatMap((req, r) =>
    shownTexts(req).flatMap(({ where, text }) =>
      readable(text).flatMap((t) => framesIn(t).map((f) => ({ ...f, req: r, where }))),
    ),
  );
}

// ---- the fake model ---------------------------------------------------------------------------------

/** OpenComms' own line that tells the model to pull: "N more OpenComms message(s) are waiting …
 *  call opencomms_pull" (or Codex's Stop notice "… message(s) … are waiting. Call the opencomms_pull tool"). */
export const TOLD_TO_PULL = /message\(s\)[^\n]{0,160}waiting[^\n]{0,240}opencomms_pull/i;

/** Index of the last element matching `f`, or -1 (Array#findLastIndex is ES2023; the project targets older). */
const lastIndex = <T>(xs: T[], f: (x: T) => boolean): number => {
  for (let i = xs.length - 1; i >= 0; i--) if (f(xs[i]!)) return i;
  return -1;
};

/** What the host added since the model's last turn: the texts after its last assistant message or
 *  tool call (hook context, a prompt, a wake, tool results). */
export function newestInput(req: ModelRequest): string {
  const b = req.body;
  if (req.api === 'anthropic') {
    const msgs: any[] = b.messages ?? [];
    const last = lastIndex(msgs, (m) => m.role === 'assistant');
    return msgs
      .slice(last + 1)
      .flatMap((m) => textsOf(m.content))
      .join('\n');
  }
  if (req.api === 'responses') {
    const input: any[] = Array.isArray(b.input) ? b.input : [];
    const last = lastIndex(
      input,
      (i) => i.role === 'assistant' || i.type === 'function_call' || i.type === 'custom_tool_call',
    );
    return input
      .slice(last + 1)
      .map((i) =>
        typeof i.output === 'string' ? i.output : i.output ? textsOf(i.output).join('') : textsOf(i.content).join(''),
      )
      .join('\n');
  }
  const msgs: any[] = b.messages ?? [];
  const last = lastIndex(msgs, (m) => m.role === 'assistant');
  return msgs
    .slice(last + 1)
    .map((m) => textsOf(m.content).join(''))
    .join('\n');
}

/** The `remaining` count of an OpenComms tool result (JSON after any host prefix), if readable. */
function remainingIn(text: string): number {
  const i = text.indexOf('{');
  if (i < 0) return 0;
  try {
    const r = JSON.parse(text.slice(i, text.lastIndexOf('}') + 1));
    return typeof r?.data?.remaining === 'number' ? r.data.remaining : 0;
  } catch {
    return 0;
  }
}

/** A model that does what OpenComms tells it: it calls `pullTool` when OpenComms' own line says
 *  mail is waiting, and again while a pull answers that more remains; else it says `ok` (or hands
 *  the request to `other`, e.g. to join). */
export const obeyPull =
  (pullTool: string, other?: (req: ModelRequest) => string | undefined) =>
  (req: ModelRequest): string => {
    const newest = newestInput(req);
    if (TOLD_TO_PULL.test(newest)) return `CALL ${pullTool} {}`;
    if (req.endsWithToolResult) {
      const last = req.toolResults.at(-1)?.text ?? '';
      return remainingIn(last) > 0 ? `CALL ${pullTool} {}` : 'SAY done';
    }
    return other?.(req) ?? 'SAY ok';
  };

// ---- the check --------------------------------------------------------------------------------------

type Status = string | undefined;

/**
 * Every way the model's view of `sent` breaks the promise, as sentences with the numbers (empty
 * when none): a message not reconstructable from the frames it saw whole; a frame it saw cut; an
 * envelope marked delivered that it never saw whole; an envelope not delivered (lost, when
 * `expectAllDelivered`); a frame shown more than once in the final request of the conversation; the
 * order of first sight not the order sent.
 */
export function problems(
  sent: Sent[],
  reqs: ModelRequest[],
  status: (id: string) => Status,
  o: { final?: ModelRequest; expectAllDelivered?: boolean } = {},
): string[] {
  const out: string[] = [];
  const seen = framesSeen(reqs);
  const owner = new Map<string, { m: number; k: number }>();
  sent.forEach((s, m) => {
    s.ids.forEach((id, k) => {
      owner.set(id, { m, k });
    });
  });
  const label = (id: string) => {
    const w = owner.get(id)!;
    const s = sent[w.m]!;
    return `${s.tag} (${s.text.length} chars)${s.ids.length > 1 ? ` part ${w.k + 1}/${s.ids.length}` : ''} ${id}`;
  };
  const whole = new Map<string, string>();
  const firstWhole: string[] = [];
  for (const f of seen) {
    const w = owner.get(f.id);
    if (!w) continue;
    const s = sent[w.m]!;
    const ok = f.content !== null && f.content.length > 0 && s.text.includes(f.content);
    if (!ok) {
      out.push(
        `cut: ${label(f.id)} shown cut in request #${f.req} (${f.where}): ${f.content === null ? `no complete frame, ${f.shownChars} chars after its header` : `content of ${f.content.length} chars is not a slice of the message`}`,
      );
      continue;
    }
    if (s.ids.length > 1 && (f.part?.n !== w.k + 1 || f.part?.of !== s.ids.length))
      out.push(`label: ${label(f.id)} framed as part ${f.part?.n ?? '-'} of ${f.part?.of ?? '-'}`);
    const before = whole.get(f.id);
    if (before !== undefined && before !== f.content) out.push(`differs: ${label(f.id)} shown with two contents`);
    if (before === undefined) {
      whole.set(f.id, f.content!);
      firstWhole.push(f.id);
    }
  }
  for (const s of sent) {
    const got = s.ids.map((id) => whole.get(id));
    const missing = s.ids.filter((id) => !whole.has(id));
    if (missing.length) {
      const shown = got.filter((x) => x !== undefined).reduce((n, x) => n + x!.length, 0);
      out.push(
        `not whole: ${s.tag} (${s.text.length} chars): ${missing.length} of ${s.ids.length} envelope(s) never shown whole; ${shown} of ${s.text.length} chars shown whole`,
      );
    } else if (got.join('') !== s.text) {
      const joined = got.join('');
      let d = 0;
      while (d < joined.length && joined[d] === s.text[d]) d++;
      out.push(
        `differs: ${s.tag}: its frames joined are ${joined.length} chars, not the ${s.text.length} sent (first difference at ${d})`,
      );
    }
    for (const id of s.ids) {
      const st = status(id);
      if (st === 'delivered' && !whole.has(id))
        out.push(`delivered unseen: ${label(id)} is delivered, never shown whole`);
      if (o.expectAllDelivered && st !== 'delivered') out.push(`not delivered: ${label(id)} is ${st ?? 'missing'}`);
    }
  }
  if (o.final) {
    const count = new Map<string, number>();
    for (const f of framesSeen([o.final])) count.set(f.id, (count.get(f.id) ?? 0) + 1);
    for (const [id, n] of count) if (owner.has(id) && n > 1) out.push(`twice: ${label(id)} shown ${n} times`);
  }
  const order = sent.flatMap((s) => s.ids).filter((id) => whole.has(id));
  if (firstWhole.join() !== order.join())
    out.push(
      `order: first shown whole ${firstWhole.map((id) => label(id).split(' ')[0]).join(', ')}; sent ${order.map((id) => label(id).split(' ')[0]).join(', ')}`,
    );
  return out;
}

/** Delivery status of each envelope: live (state) or terminal (history). */
export async function statuses(rt: {
  read(): Promise<any>;
  store: { history(channelId: string, limit: number): Promise<any[]> };
}): Promise<Map<string, string>> {
  const state = await rt.read();
  const out = new Map<string, string>();
  for (const ch of Object.values(state.channels) as any[])
    for (const e of await rt.store.history(ch.id, 1000)) out.set(e.message_id, e.delivery_status);
  for (const e of Object.values(state.messages) as any[]) out.set(e.message_id, e.delivery_status);
  return out;
}

/** One line on how the mail reached the model, for the test's log: messages, envelopes (parts),
 *  the requests that showed a frame of them, and the requests that followed a tool result. */
export function summary(sent: Sent[], reqs: ModelRequest[]): string {
  const ours = new Set(sent.flatMap((s) => s.ids));
  const showing = reqs.filter((r) => framesSeen([r]).some((f) => ours.has(f.id))).length;
  return (
    `${sent.length} message(s) of ${[...new Set(sent.map((s) => s.text.length))].join('/')} chars as ` +
    `${ours.size} envelope(s); ${reqs.length} model request(s), ${showing} showing a frame of them, ` +
    `${reqs.filter((r) => r.endsWithToolResult).length} after a tool result`
  );
}
