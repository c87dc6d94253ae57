// The waiter that wakes an idle Codex TUI (docs/codex-wake.md), run by the launcher
// (`opencomms codex`). The TUI runs its turns on Codex's shared background server (the
// app-server daemon); its `thread/queue/add` request (what `codex queue` sends) hands that server
// a prompt, which it runs as a turn of the TUI's thread at once when the thread is idle, or right
// after the running turn, and the TUI shows it. The prompt is the fixed wake prompt
// (wake-trigger.ts): nothing is typed into the terminal, and no peer byte leaves this process.
//
// Exactly once: the drain (pause, cooldown, budgets, stale, and the launcher's busy hold) puts the
// batch in flight under this process's tag before the prompt is queued; the woken turn's
// UserPromptSubmit hook commits it and hands it over as additionalContext (wake-hook.ts). A
// batch the turn never shows goes back to the queue after WAKE_CONFIRM_MS; a killed launcher's
// batch is swept back by the next boundary or server. No wake loop: the woken turn leaves nothing
// pending, and a batch in flight blocks a second one.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Hold } from '../../machines/index.ts';
import { CONTEXT_NOTE_RESERVE } from '../../src/protocol/limits.ts';
import { routeLimit } from '../route-limits.ts';
import type { State } from '../../src/protocol/schema.ts';
import { isMemberId } from '../../src/protocol/ids.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { listPins, resolvePaths } from '../../src/store/index.ts';
import { SPAWN_HOSTS } from '../spawn.ts';
import { HOST } from './install.ts';
import { VERSION } from '../../src/version.ts';
import { connectAppServer, controlSocket } from './app-server.ts';
import { wakePrompt } from './wake-trigger.ts';

/** How often a wake held at the last moment by a keystroke looks again whether the user is quiet. */
const BUSY_RECHECK_MS = 100;

/** How long a queued wake may wait for its turn before its batch goes back to the queue: a busy
 *  turn runs first, and a long one is normal; a wake prompt the user deleted from Codex's queue
 *  never runs, and its mail must not stay in flight for the launcher's whole life. */
const WAKE_CONFIRM_MS = 10 * 60_000;

export interface WaiterOptions {
  project: string;
  env: NodeJS.ProcessEnv;
  /** The launcher's hold: the user is typing, or the screen is still changing (a turn runs). */
  busy(): boolean;
  log(line: string): void;
}

export interface Waiter {
  /** The user went quiet: mail held while they typed may go now. */
  recheck(): void;
  close(): Promise<void>;
}

/** The member this Codex session is: OPENCOMMS_MEMBER_ID, or the project's one pinned Codex
 *  member (the hook runner binds the thread to it by the same rule, binding.ts). */
async function ownMember(project: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  const id = env.OPENCOMMS_MEMBER_ID?.trim();
  if (id) return isMemberId(id) ? id : null;
  const pins = (await listPins(resolvePaths(project))).pins.filter((p) => p.host === HOST);
  return pins.length === 1 ? pins[0]!.member_id : null;
}

/** The Codex thread the member is bound to (its first prompt binds it), or null. */
function threadOf(state: Readonly<State>, member: string): string | null {
  const rows = Object.values(state.channels).flatMap((ch) =>
    ch.lifecycle === 'active' ? ch.members.filter((m) => m.session_id === member && m.host === HOST) : [],
  );
  const ids = new Set(rows.map((m) => m.host_session_id));
  const [thread] = [...ids];
  return ids.size === 1 && thread && !rows.some((m) => m.stale) ? thread : null;
}

/** Queues the wake prompt on the thread in Codex's background server, which starts it as a turn
 *  at once when the thread is idle, or right after the running turn (as `codex queue --resume`). */
async function queuePrompt(o: WaiterOptions, thread: string, wake: string): Promise<void> {
  const codexHome = o.env.CODEX_HOME || join(homedir(), '.codex');
  const server = await connectAppServer(controlSocket(codexHome), { name: 'opencomms', version: VERSION }).catch(
    (e: Error) => {
      throw new Error(`no Codex background server to wake the thread (${e.message}); is Codex in embedded mode?`);
    },
  );
  try {
    // A key pressed between the drain's hold check and now (the launcher reads the terminal a
    // moment after tmux or the user sends it) holds the wake too: it goes once the user is quiet.
    while (o.busy()) await sleep(BUSY_RECHECK_MS);
    const added = await server.request<{ queuedSubmission: { id: string } }>('thread/queue/add', {
      threadId: thread,
      input: [{ type: 'text', text: wakePrompt() }],
      clientUserMessageId: wake,
    });
    // An idle, loaded thread has started the prompt already (the start then finds nothing); a
    // thread the server has not loaded yet (a session still resuming) starts it now. A refusal
    // leaves the prompt queued for the thread's next turn end, which is a wake all the same.
    await server
      .request('thread/queue/start', { threadId: thread, queuedSubmissionId: added.queuedSubmission.id })
      .catch(() => {});
  } finally {
    server.close();
  }
}

export async function startWaiter(o: WaiterOptions): Promise<Waiter | null> {
  const member = await ownMember(o.project, o.env);
  if (!member) {
    o.log('no Codex member to wake: set OPENCOMMS_MEMBER_ID or pin one (`opencomms install-member --host codex`)');
    return null;
  }
  const deadlines = new Set<NodeJS.Timeout>();
  /** The last drain was held by the launcher: it drains again once the user and screen are quiet. */
  let held = false;
  const rt: Runtime = openRuntime(o.project, {
    deliverOnChange: true,
    spawnHosts: SPAWN_HOSTS,
    log: o.log,
    driver: {
      method: 'push',
      confirmsLater: true,
      // The woken turn's UserPromptSubmit hook shows the batch as its context, with room left for
      // OpenComms' own line about mail that waits.
      maxSize: routeLimit(HOST, 'hook_context') - CONTEXT_NOTE_RESERVE,
      owns: (rid, state) => rid === member && threadOf(state, member) !== null,
      hold: (): Hold | null => {
        held = o.busy();
        return held ? 'busy' : null;
      },
      deliver: async (rid, _text, ids) => {
        const thread = threadOf(await rt.peek(), rid);
        if (!thread) throw new Error('the Codex thread is no longer bound');
        const t0 = Date.now();
        await queuePrompt(o, thread, `opencomms-wake-${randomUUID()}`);
        o.log(`woke thread ${thread} for ${ids.length} message(s) ${ids.join(' ')} (queued in ${Date.now() - t0} ms)`);
        const t = setTimeout(() => {
          deadlines.delete(t);
          void unconfirmed(rt, rid, ids).catch((e) => o.log(`requeue failed: ${(e as Error).message}`));
        }, WAKE_CONFIRM_MS);
        t.unref();
        deadlines.add(t);
      },
    },
  });
  await rt.start();
  return {
    recheck: () => {
      if (held) rt.wake(member);
    },
    async close() {
      for (const t of deadlines) clearTimeout(t);
      // Codex is gone or going: a wake it has not shown goes back to the queue now rather than
      // at the next sweep (the sweep would find this process gone).
      await unconfirmed(rt, member, Object.keys((await rt.peek()).messages)).catch(() => {});
      await rt.close();
    },
  };
}

/** The woken turn never showed these: back to the queue (those it did show are committed). */
async function unconfirmed(rt: Runtime, rid: string, ids: string[]): Promise<void> {
  const state = await rt.peek();
  const held = (id: string) =>
    state.messages[id]?.recipient_session_id === rid &&
    state.messages[id]?.delivery_status === 'in_flight' &&
    state.messages[id]?.in_flight_by === rt.tag;
  const left = ids.filter(held);
  if (left.length)
    await rt.run({
      op: 'requeue',
      rid,
      message_ids: left,
      error: 'the woken Codex turn did not show the batch in time',
      held: { by: rt.tag, attempts: left.map((id) => state.messages[id]!.attempts) },
    });
}
