// `opencomms send <channel> …` and `opencomms read <channel>` (operator.md "Speaking to the agents"):
// the person who runs the agents writes into a channel and reads what it said, without an MCP
// client. The send is the members' send with the operator as sender (role `Operator`): framed
// like every message, bound by the rate limit, budgets, pause and the duplicate window, and
// delivered by every route. The read is the channel's history; it takes nobody's mail.
import type { Envelope } from '../../protocol/schema.ts';
import type { CliCommand } from '../command.ts';
import { answer, projectOf, withRuntime } from '../context.ts';

type View = Pick<Envelope, 'sender_role' | 'recipient_role' | 'message_type' | 'timestamp' | 'hop_count'> & {
  message_id: string;
  content: string;
  delivery_status: string;
  part?: { n: number; of: number };
};

/** Control and format characters (escape sequences, bidi overrides) shown as `\u{…}`: peer text
 *  never drives the operator's terminal. Line breaks and tabs stay. */
const printable = (text: string) => text.replace(/[^\P{C}\n\t]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);

/** One entry per message (a broadcast is one envelope per recipient; parts are their own),
 *  oldest first, with each recipient's delivery state. */
export function renderRead(views: readonly View[]): string {
  const groups = new Map<string, View[]>();
  for (const v of [...views].reverse()) {
    const key = `${v.sender_role}\u0000${v.timestamp}\u0000${v.part?.n ?? 0}\u0000${v.content}`;
    groups.set(key, [...(groups.get(key) ?? []), v]);
  }
  if (!groups.size) return 'Nothing was said on this channel yet.';
  return [...groups.values()]
    .map((g) => {
      const v = g[0]!;
      const to = g.map((x) => `${x.recipient_role} (${x.delivery_status})`).join(', ');
      const part = v.part ? `, part ${v.part.n} of ${v.part.of}` : '';
      const at = new Date(v.timestamp).toISOString().slice(11, 19);
      return `${at}  ${v.sender_role} → ${to}  [${v.message_type}, hop ${v.hop_count}${part}]\n${printable(v.content)}`;
    })
    .join('\n\n');
}

export const speak: CliCommand = {
  register(program, ctx) {
    program
      .command('send <channel> <text>')
      .description('write into a channel as the operator (framed like every message; every rule applies)')
      .option('--to <member>', 'one member, by role or session id')
      .option('--broadcast', 'every live member of the channel')
      .option('--type <type>', 'review_request, review_response or manual', 'manual')
      .option('--json', 'one {ok, message, data} document')
      .action(
        async (
          channel: string,
          text: string,
          o: { to?: string; broadcast?: boolean; type: string; json?: boolean },
          cmd,
        ) => {
          const args = { channel, content: text, type: o.type, to: o.to, broadcast: o.broadcast === true };
          const r = await withRuntime(projectOf(cmd), (rt) => rt.run({ op: 'send', sid: { operator: true }, args }));
          ctx.exit(answer(ctx.io, r, o.json, () => r.message));
        },
      );
    program
      .command('read <channel>')
      .description("what a channel said, oldest first, with each recipient's delivery state; takes nobody's mail")
      .option('--limit <n>', 'envelopes read, newest first (1..100)', '100')
      .option('--json', 'one {ok, message, data} document')
      .action(async (channel: string, o: { limit: string; json?: boolean }, cmd) => {
        const r = await withRuntime(projectOf(cmd), (rt) =>
          rt.run({ op: 'history', sid: { operator: true }, args: { channel, limit: o.limit } }),
        );
        ctx.exit(answer(ctx.io, r, o.json, (d: { messages: View[] }) => renderRead(d.messages)));
      });
  },
};
