// The waiter that wakes an idle Codex TUI (docs/codex-wake.md), run by the launcher
// (`opencomms codex`). The TUI runs its turns on Codex's shared background server (the
// app-server daemon); `codex queue --thread <id> --message <text> --resume` hands that server a
// prompt, which it runs as a turn of the TUI's thread at once when the thread is idle, or right
// after the running turn, and the TUI shows it. The prompt is the fixed wake prompt
// (wake-trigger.ts): nothing is typed into the terminal, and no peer byte leaves this process.
//
// Exactly once: the drain (pause, cooldown, budgets, stale, and the launcher's busy hold) puts the
// batch in flight under this process's tag before the prompt is queued; the woken turn's
// UserPromptSubmit hook commits it and hands it over as additionalContext (wake-hook.ts). A
// batch the turn never shows goes back to the queue after WAKE_CONFIRM_MS; a killed launcher's
// batch is swept back by the next boundary or server. No wake loop: the woken turn leaves nothing
// pending, and a batch in flight blocks a second one.
import { execFile } from 'node:child_process';
import type { Hold } from '../../machines/index.ts';
import type { State } from '../../src/protocol/schema.ts';
import { isMemberId } from '../../src/protocol/ids.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { listPins, resolvePaths } from '../../src/store/index.ts';
import { SPAWN_HOSTS } from '../spawn.ts';
import { HOST } from './install.ts';
import { wakePrompt } from './wake-trigger.ts';

/** How long `codex queue` may take: it starts a Codex process that connects to the running
 *  daemon (about 0.2 s here); a daemon that does not answer in this time is not going to. */
const QUEUE_TIMEOUT_MS = 15_000;

/** How long a queued wake may wait for its turn before its batch goes back to the queue: a busy
 *  turn runs first, and a long one is normal; a wake prompt the user deleted from Codex's queue
 *  never runs, and its mail must not stay in flight for the launcher's whole life. */
const WAKE_CONFIRM_MS = 10 * 60_000;

export interface WaiterOptions {
  project: string;
  /** The Codex executable (`codex queue` is run with it). */
  codex: string;
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
  const rows = Object.values(state.channels).flatMap((ch) => (ch.lifecycle === 'active' ? ch.members.filter((m) => m.session_id === member && m.host === HOST) : []));
  const ids = new Set(rows.map((m) => m.host_session_id));
  const [thread] = [...ids];
  return ids.size === 1 && thread && !rows.some((m) => m.stale) ? thread : null;
}

function queuePrompt(o: WaiterOptions, thread: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(o.codex, ['queue', '--thread', thread, '--message', wakePrompt(), '--resume'], { cwd: o.project, env: o.env, timeout: QUEUE_TIMEOUT_MS, encoding: 'utf8' }, (err, stdout, stderr) => {
      // Without a daemon (embedded mode) Codex keeps the prompt for the thread's next turn and
      // says it could not resume: that is no wake, so the batch goes back to the queue.
      if (err) reject(new Error(`codex queue failed: ${(stderr || err.message).trim()}`));
      else if (/could not resume/i.test(`${stdout}${stderr}`)) reject(new Error('codex queue: no Codex background server runs this thread (is Codex in embedded mode?)'));
      else resolve();
    });
  });
}

export async function startWaiter(o: WaiterOptions): Promise<Waiter | null> {
  const member = await ownMember(o.project, o.env);
  if (!member) {
    o.log('no Codex member to wake: set OPENCOMMS_MEMBER_ID or pin one (`opencomms install-member --host codex`)');
    return null;
  }
  const deadlines = new Set<NodeJS.Timeout>();
  const rt: Runtime = openRuntime(o.project, {
    watch: true,
    spawnHosts: SPAWN_HOSTS,
    log: o.log,
    driver: {
      method: 'push',
      confirmsLater: true,
      owns: (rid, state) => rid === member && threadOf(state, member) !== null,
      hold: (): Hold | null => (o.busy() ? 'busy' : null),
      deliver: async (rid, _text, ids) => {
        const thread = threadOf(await rt.peek(), rid);
        if (!thread) throw new Error('the Codex thread is no longer bound');
        await queuePrompt(o, thread);
        o.log(`woke thread ${thread} for ${ids.length} message(s) ${ids.join(' ')}`);
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
    recheck: () => rt.wake(member),
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
  const held = (id: string) => state.messages[id]?.recipient_session_id === rid && state.messages[id]?.delivery_status === 'in_flight' && state.messages[id]?.in_flight_by === rt.tag;
  const left = ids.filter(held);
  if (left.length) await rt.run({ op: 'requeue', rid, message_ids: left, error: 'the woken Codex turn did not show the batch in time' });
}
