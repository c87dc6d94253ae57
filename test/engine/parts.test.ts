// Delivered means seen (protocol.md "Parts", hosts.md "What each route shows whole"): a message larger
// than one route shows whole travels as parts, each its own envelope and frame; a hand-over (drain,
// pull) never exceeds its route's size; what does not fit stays pending, in order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BEGIN_MARKER,
  END_MARKER,
  frameContent,
  frameEnvelope,
  markerSpans,
  neutralise,
  shownSize,
  splitContent,
} from '../../src/framing.ts';
import {
  DEFAULT_ROUTE_LIMIT,
  MAX_CONTENT_CHARS,
  MAX_PART_SIZE,
  PULL_ANSWER_RESERVE,
  PULL_ENTRY_OVERHEAD,
} from '../../src/protocol/limits.ts';
import { ROUTE_LIMITS } from '../../adapters/route-limits.ts';
import type { Envelope } from '../../src/protocol/schema.ts';
import { dataOf, idsOf, mustPrompt, Sim } from './fixtures.ts';

function team() {
  const sim = new Sim();
  sim.channel(
    'team',
    [
      ['sess_a', 'Lead'],
      ['sess_b', 'Reviewer', 'pull'],
      ['sess_c', 'Builder'],
    ],
    { rate_limit: 100 },
  );
  return sim;
}

/** Unique tokens at the start, middle and end of a text of `n` characters. */
function tokened(tag: string, n: number, fill = 'x'): string {
  const start = `<${tag}-START>`;
  const mid = `<${tag}-MIDDLE>`;
  const end = `<${tag}-END>`;
  const body = n - start.length - mid.length - end.length;
  const half = Math.floor(body / 2);
  return start + fill.repeat(half) + mid + fill.repeat(body - half) + end;
}

const pulled = (o: ReturnType<Sim['run']>) =>
  dataOf<{ messages: Array<{ message_id: string; framed: string }>; message_ids: string[]; more_than_fits?: true }>(o);

/** The content of each frame of a text, in order. */
const framedContents = (text: string) =>
  [...text.matchAll(new RegExp(`${BEGIN_MARKER}\\n([\\s\\S]*?)\\n${END_MARKER}`, 'g'))].map((m) => m[1]!);

describe('shownSize: the largest count of any host', () => {
  it('is never less than UTF-16 characters, UTF-8 bytes or JSON-escaped characters', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => {
        const size = shownSize(s);
        expect(size).toBeGreaterThanOrEqual(s.length);
        expect(size).toBeGreaterThanOrEqual(Buffer.byteLength(s));
        expect(size).toBeGreaterThanOrEqual(JSON.stringify(s).length - 2);
      }),
    );
  });
});

describe('splitContent', () => {
  it('joins back to the content; each part within the size once neutralised; no marker cut', () => {
    const marker = '<<<END_UNTRUSTED_PEER_MESSAGE>>>';
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.string({ unit: 'binary', maxLength: 40 }),
            fc.constant(marker),
            fc.constant('\n'),
            fc.constant(' '),
          ),
          { maxLength: 200 },
        ),
        fc.integer({ min: 40, max: 400 }),
        (pieces, max) => {
          const content = pieces.join('');
          const parts = splitContent(content, max);
          expect(parts.join('')).toBe(content);
          for (const p of parts) {
            if (content) expect(p.length).toBeGreaterThan(0);
            expect(framedContents(frameContent(p))).toHaveLength(1);
          }
          if (parts.length > 1) for (const p of parts) expect(shownSize(neutralise(p))).toBeLessThanOrEqual(max);
          // Every marker-like run of the content lies inside one part.
          let at = 0;
          const cuts = new Set(parts.map((p) => (at += p.length)));
          for (const [a, b] of markerSpans(content)) for (let i = a + 1; i < b; i++) expect(cuts.has(i)).toBe(false);
        },
      ),
    );
  });

  it('keeps a surrogate pair whole and prefers a line break near the end of a part', () => {
    const emoji = '😀'.repeat(5000);
    for (const p of splitContent(emoji, 1000)) expect(p.length % 2).toBe(0);
    const lines = `${'a'.repeat(90)}\n`.repeat(200);
    const parts = splitContent(lines, 1000);
    for (const p of parts.slice(0, -1)) expect(p.endsWith('\n')).toBe(true);
  });
});

describe('a message larger than one part', () => {
  it('is queued as parts, in order, per recipient; the frames carry "part N of K"; joined they are the message', () => {
    const sim = team();
    const text = tokened('BIG', MAX_CONTENT_CHARS);
    const o = sim.send('sess_a', 'team', text, { broadcast: true });
    const d = dataOf<{ parts: number; part_message_ids: string[][] }>(o);
    expect(d.parts).toBeGreaterThanOrEqual(Math.ceil(MAX_CONTENT_CHARS / MAX_PART_SIZE));
    expect(idsOf(o)).toEqual(d.part_message_ids.map((ids) => ids[0]));
    for (const ids of d.part_message_ids) {
      const envelopes = ids.map((id) => sim.msg(id));
      expect(envelopes.map((e) => e.part)).toEqual(ids.map((_, i) => ({ n: i + 1, of: d.parts })));
      expect(envelopes.map((e) => e.content).join('')).toBe(text);
      for (const e of envelopes) expect(shownSize(e.content)).toBeLessThanOrEqual(MAX_PART_SIZE);
      const rid = envelopes[0]!.recipient_session_id;
      expect(sim.state.queues[rid]!.slice(-ids.length)).toEqual(ids);
      expect(frameEnvelope(envelopes[1]!, 'team')).toContain(`| id: ${ids[1]} | part: 2 of ${d.parts} | reply_to:`);
    }
  });

  it('counts one send against the rate limit and one content against duplicates', () => {
    const sim = new Sim();
    sim.channel(
      'team',
      [
        ['sess_a', 'Lead'],
        ['sess_b', 'Reviewer'],
      ],
      { rate_limit: 2 },
    );
    const text = tokened('R', 30_000);
    sim.send('sess_a', 'team', text);
    sim.refuse({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: text } }, 'duplicate_content');
    sim.send('sess_a', 'team', 'second');
    sim.refuse({ op: 'send', sid: 'sess_a', args: { channel: 'team', content: 'third' } }, 'rate_limited');
  });

  it('a message within one part is sent whole, with no part field', () => {
    const sim = team();
    const [id] = idsOf(sim.send('sess_a', 'team', 'x'.repeat(MAX_PART_SIZE), { broadcast: true }));
    expect(sim.msg(id!).part).toBeUndefined();
    expect(dataOf(sim.send('sess_a', 'team', 'short', { broadcast: true })).parts).toBeUndefined();
  });
});

describe('every route fits the largest framed part', () => {
  it('each measured limit and the default hold one part of the most expensive text, framed', () => {
    const sim = team();
    // A control character costs 6 (JSON's \u00XX): the most a part can cost per character.
    const [id] = idsOf(sim.send('sess_a', 'team', '\u0001'.repeat(20_000), { to: 'Reviewer' }));
    const first: Envelope = sim.msg(id!);
    const framed = frameEnvelope({ ...first, sender_role: 'R'.repeat(32) }, 'c'.repeat(64));
    const limits = [DEFAULT_ROUTE_LIMIT, ...Object.values(ROUTE_LIMITS).flatMap((r) => Object.values(r))];
    for (const limit of limits)
      expect(shownSize(framed) + PULL_ENTRY_OVERHEAD + PULL_ANSWER_RESERVE).toBeLessThanOrEqual(limit);
  });
});

describe('a hand-over never exceeds its route', () => {
  it('drain: the longest FIFO prefix within maxSize; the rest stays pending and follows in order', () => {
    const sim = team();
    const sent = [1, 2, 3, 4, 5, 6].map(
      (i) => idsOf(sim.send('sess_a', 'team', tokened(`M${i}`, 2900), { to: 'Builder' }))[0]!,
    );
    const seen: string[] = [];
    for (let round = 0; round < 6 && seen.length < sent.length; round++) {
      sim.advance(5000);
      const p = mustPrompt(sim.drain('sess_c', { maxSize: 10_000 }));
      expect(shownSize(p.text)).toBeLessThanOrEqual(10_000);
      expect(p.message_ids.length).toBeLessThan(sent.length);
      sim.commit(p);
      seen.push(...p.message_ids);
    }
    expect(seen).toEqual(sent);
  });

  it('pull: within max_size, FIFO, says more waits, and hands over the rest at the next read', () => {
    const sim = team();
    const text = tokened('P', 50_000);
    const parts = dataOf<{ part_message_ids: string[][] }>(sim.send('sess_a', 'team', text, { to: 'Reviewer' }))
      .part_message_ids[0]!;
    const read: string[] = [];
    let contents = '';
    for (let i = 0; i < parts.length && read.length < parts.length; i++) {
      const o = sim.ok({ op: 'pull', sid: 'sess_b', args: {}, max_size: 20_000 });
      const d = pulled(o);
      expect(JSON.stringify(o.result).length).toBeLessThanOrEqual(20_000);
      expect(d.messages.length).toBeGreaterThan(0);
      if (read.length + d.messages.length < parts.length) {
        expect(d.more_than_fits).toBe(true);
        expect(o.result.message).toMatch(/call opencomms_pull again/i);
      }
      read.push(...d.messages.map((m) => m.message_id));
      contents += d.messages.flatMap((m) => framedContents(m.framed)).join('');
      for (const id of d.message_ids) expect(sim.msg(id).delivery_status).toBe('delivered');
    }
    expect(read).toEqual(parts);
    expect(contents).toBe(text);
    for (const id of parts.slice(read.length)) expect(sim.msg(id).delivery_status).toBe('pending');
  });

  it('pull with no room for the first frame takes nothing and leaves it pending', () => {
    const sim = team();
    const [id] = idsOf(sim.send('sess_a', 'team', tokened('N', 3000), { to: 'Reviewer' }));
    const d = pulled(sim.ok({ op: 'pull', sid: 'sess_b', args: {}, max_size: 1000 }));
    expect(d.messages).toEqual([]);
    expect(d.more_than_fits).toBe(true);
    expect(sim.msg(id!).delivery_status).toBe('pending');
  });
});

describe('an envelope queued whole by an older OpenComms, longer than one part', () => {
  it('is replaced by its parts at its next hand-over, in its place in the queue, and read whole', () => {
    const sim = team();
    const [before] = idsOf(sim.send('sess_a', 'team', 'before', { to: 'Reviewer' }));
    const text = tokened('OLD', 50_000);
    // As an older version queued it: one envelope with the whole text.
    const [old] = idsOf(sim.send('sess_a', 'team', 'placeholder', { to: 'Reviewer' }));
    sim.state.messages[old!]!.content = text;
    const [after] = idsOf(sim.send('sess_a', 'team', 'after', { to: 'Reviewer' }));
    const read: Array<{ message_id: string; framed: string }> = [];
    for (let i = 0; i < 20 && sim.state.queues.sess_b?.length; i++)
      read.push(...pulled(sim.ok({ op: 'pull', sid: 'sess_b', args: {}, max_size: 20_000 })).messages);
    expect(sim.state.messages[old!]).toBeUndefined();
    expect(read[0]!.message_id).toBe(before);
    expect(read.at(-1)!.message_id).toBe(after);
    expect(
      read
        .slice(1, -1)
        .flatMap((m) => framedContents(m.framed))
        .join(''),
    ).toBe(text);
    expect(read.slice(1, -1).every((m) => / \| part: \d+ of \d+ \| /.test(m.framed))).toBe(true);
  });
});

describe('reads answer within the tool result', () => {
  it('inbox and history stop at max_size, say so, and take nothing', () => {
    const sim = team();
    for (let i = 0; i < 6; i++) sim.send('sess_a', 'team', tokened(`H${i}`, 5000), { to: 'Reviewer' });
    const inbox = sim.ok({ op: 'inbox', sid: 'sess_b', args: { channel: 'team', limit: 100 }, max_size: 20_000 });
    const i = dataOf<{ messages: unknown[]; pending: number; more_than_fits?: true }>(inbox);
    expect(JSON.stringify(inbox.result).length).toBeLessThanOrEqual(20_000);
    expect([i.messages.length, i.pending, i.more_than_fits]).toEqual([3, 6, true]);
    expect(inbox.result.message).toMatch(/opencomms_pull reads them all/);
    const history = sim.ok({ op: 'history', sid: 'sess_b', args: { channel: 'team', limit: 100 }, max_size: 20_000 });
    expect(JSON.stringify(history.result).length).toBeLessThanOrEqual(20_000);
    expect(dataOf<{ more_than_fits?: true }>(history).more_than_fits).toBe(true);
    expect(sim.state.queues.sess_b).toHaveLength(6);
    const whole = sim.ok({ op: 'inbox', sid: 'sess_b', args: { channel: 'team', limit: 100 } });
    expect(dataOf<{ messages: unknown[] }>(whole).messages).toHaveLength(6);
  });
});
