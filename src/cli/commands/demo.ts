// `npm start` / `opencomms demo`: a scripted round trip through the real store, engine and
// machines in a throw-away project, printing every envelope transition as it was persisted.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Caller } from '../../engine/index.ts';
import { openRuntime, type DeliveryDriver } from '../../runtime/runtime.ts';
import type { CliCommand } from '../command.ts';

export async function demo(out: (line: string) => void = console.log): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'opencomms-demo-'));
  const member = (session_id: string): Caller => ({
    session_id,
    host: 'demo',
    surface: 'cli',
    delivery_mode: 'push',
    host_session_id: session_id,
    project_id: 'local-project',
    worktree: dir,
  });
  const prompts: string[] = [];
  const driver: DeliveryDriver = {
    method: 'push',
    owns: () => true,
    deliver: async (rid, text) => {
      prompts.push(rid);
      out(`\n--- prompt handed to ${rid} ---\n${text}\n--- end of prompt ---`);
    },
  };
  const rt = openRuntime(dir, { driver });
  try {
    await rt.start();
    out(`OpenComms demo in ${dir}`);
    const step = async (label: string, p: Promise<{ ok: boolean; message: string }>) => {
      const r = await p;
      out(`${r.ok ? 'ok ' : 'NO '} ${label}: ${r.message}`);
      if (!r.ok) throw new Error(`${label} refused`);
      return r as { ok: true; message: string; data: Record<string, unknown> };
    };
    await step(
      'Builder creates "review"',
      rt.run({
        op: 'create',
        caller: member('sess_builder'),
        args: { channel: 'review', role: 'Builder', role_prompt: 'You write the code.' },
      }),
    );
    await step(
      'Reviewer joins',
      rt.run({
        op: 'join',
        caller: member('sess_reviewer'),
        args: { channel: 'review', role: 'Reviewer', role_prompt: 'You review the code.' },
      }),
    );
    const sent = await step(
      'Builder sends a review_request',
      rt.run({
        op: 'send',
        sid: 'sess_builder',
        args: { channel: 'review', type: 'review_request', content: 'Please review src/engine/send.ts.' },
      }),
    );
    await rt.settled();
    const [first] = sent.data.message_ids as string[];
    await step(
      'Reviewer replies',
      rt.run({
        op: 'send',
        sid: 'sess_reviewer',
        args: {
          channel: 'review',
          type: 'review_response',
          content: 'Looks good; one nit in resolveRecipients.',
          reply_to: first,
        },
      }),
    );
    await rt.settled();
    const state = await rt.read();
    // Terminal envelopes leave state.json for the channel's history log in the same mutation.
    const logged = await rt.store.history(state.channels.review!.id, 10);
    const all = [...Object.values(state.messages), ...logged.reverse()];
    out('\nEnvelope transitions, as persisted (state.json for live mail, .opencomms/history/ once terminal):');
    for (const e of all) {
      const trail = e.transitions.map(([event, to, at]) => `${event}@+${at - e.timestamp}ms → ${to}`).join('  ');
      out(`  ${e.message_id.slice(0, 12)}… ${e.sender_role} → ${e.recipient_role} (hop ${e.hop_count}): ${trail}`);
    }
    const delivered = all.filter((e) => e.delivery_status === 'delivered').length;
    out(
      `\n${delivered} of ${all.length} envelopes delivered; ${prompts.length} prompts handed over; state.json now holds ${Object.keys(state.messages).length} live envelopes.`,
    );
    return delivered === 2 ? 0 : 1;
  } finally {
    await rt.close();
    await rm(dir, { recursive: true, force: true });
  }
}

export const demoCommand: CliCommand = {
  register(program, ctx) {
    program
      .command('demo')
      .description('a scripted round trip in a throw-away project (what `npm start` runs)')
      .action(async () => ctx.exit(await demo((line) => ctx.io.out(`${line}\n`))));
  },
};
