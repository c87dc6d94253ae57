// The inspector tests' project: a send, a drain and a sweep, a pull, a pause and a save, with a
// unique token planted in every piece of peer text (message content, role prompts, host session ids,
// session ids, the save summary and description), so a test can prove none of it reaches the
// inspector. `settle` runs between steps (the caller waits there until the inspector caught up).
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Caller } from '../../src/engine/index.ts';
import { CLI_PROJECT_ID, operatorActor } from '../../src/runtime/operator.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';

const token = (what: string) => `TOKEN${what}${randomUUID().replaceAll('-', '')}`;

export const TOKENS = {
  content1: token('content'),
  content2: token('content'),
  promptLead: token('prompt'),
  promptPusher: token('prompt'),
  hostLead: token('hostsid'),
  hostPusher: token('hostsid'),
  summary: token('summary'),
  description: token('description'),
  /** Session ids: a host's own session id can be one (OpenCode's is). */
  sidLead: `sess_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
  sidPusher: `sess_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
};

export const caller = (dir: string, session_id: string, delivery_mode: string, host_session_id: string): Caller => ({
  session_id,
  host: 'test',
  surface: 'cli',
  delivery_mode,
  host_session_id,
  project_id: 'local-project',
  worktree: dir,
});

const must = async (p: Promise<{ ok: boolean; message: string; data?: unknown }>) => {
  const r = await p;
  if (!r.ok) throw new Error(r.message);
  return r as { ok: true; message: string; data: any };
};

/** Channel `team`: Lead (pull) and Pusher (push). */
export async function setUp(rt: Runtime, dir: string): Promise<void> {
  const t = TOKENS;
  await must(
    rt.run({
      op: 'create',
      caller: caller(dir, t.sidLead, 'pull', t.hostLead),
      args: { channel: 'team', role: 'Lead', role_prompt: t.promptLead },
    }),
  );
  await must(
    rt.run({
      op: 'join',
      caller: caller(dir, t.sidPusher, 'push', t.hostPusher),
      args: { channel: 'team', role: 'Pusher', role_prompt: t.promptPusher },
    }),
  );
}

export interface Ids {
  pushed: string;
  pulled: string;
}

/** The steps; `settle(step, message id)` after each (the envelope the step moved, if one). */
export async function play(
  rt: Runtime,
  dir: string,
  settle: (step: string, id?: string) => Promise<void>,
): Promise<Ids> {
  const t = TOKENS;
  const send = await must(
    rt.run({
      op: 'send',
      sid: t.sidLead,
      args: { channel: 'team', content: t.content1, to: 'Pusher', session_description: t.description },
    }),
  );
  const pushed = send.data.message_ids[0] as string;
  await settle('send', pushed);
  await must(rt.run({ op: 'drain', rid: t.sidPusher }));
  await settle('drain', pushed);
  await must(rt.run({ op: 'sweep', alive: () => false }));
  await settle('sweep', pushed);
  const back = await must(
    rt.run({ op: 'send', sid: t.sidPusher, args: { channel: 'team', content: t.content2, to: 'Lead' } }),
  );
  const pulled = back.data.message_ids[0] as string;
  await must(rt.run({ op: 'pull', sid: t.sidLead, args: { channel: 'team' } }));
  await settle('pull', pulled);
  await must(rt.run({ op: 'pause', sid: { operator: true }, args: { channel: 'team' } }));
  await settle('pause');
  await must(
    rt.run({
      op: 'save_session',
      actor: operatorActor(dir, CLI_PROJECT_ID),
      args: { channel: 'team', summary: t.summary },
    }),
  );
  await settle('save');
  return { pushed, pulled };
}

/** Every planted token that occurs in `text` (what must stay empty). */
export const leaked = (text: string): string[] => Object.values(TOKENS).filter((v) => text.includes(v));

/** Every file the project's store wrote, as one text: where the planted tokens must be found
 *  (the control that they were planted at all). */
export async function storeText(dir: string): Promise<string> {
  const { readdir, readFile } = await import('node:fs/promises');
  const files = await readdir(join(dir, '.opencomms'), { recursive: true, withFileTypes: true });
  const texts = await Promise.all(
    files.filter((f) => f.isFile()).map((f) => readFile(join(f.parentPath, f.name), 'utf8').catch(() => '')),
  );
  return texts.join('\n');
}
