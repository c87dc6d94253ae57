// The waiter that wakes an idle Claude Code session (hosts.md "Waking an idle Claude Code session"). Registered as an
// `asyncRewake` hook on SessionStart and Stop: it runs in the background, sleeps on the store's
// subscription until mail for this session's member may be handed over (pause, cooldown, budgets
// and stale rules are the drain's), then writes the framed batch to stderr and exits 2, which
// makes Claude Code start a turn with it.
//
// Exactly once: the batch is persisted in flight under the Claude Code process's tag before the
// exit, and committed only when the woken turn shows it (hook-events.ts `confirmWake`). A waiter
// orphaned by a killed `claude` never takes mail (it checks first, and notices within a second);
// a batch whose Claude Code died before the turn is swept back to the queue. No wake loop: the
// batch is in flight, not pending, when the woken turn's own Stop starts the next waiter.
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { routeLimit } from '../route-limits.ts';
import { memberships } from '../../src/engine/lookup.ts';
import type { State } from '../../src/protocol/schema.ts';
import { openRuntime, processAlive, processTag, Runtime } from '../../src/runtime/runtime.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { HOOK_RUNNER } from '../install/bundles.ts';
import { SPAWN_HOSTS } from '../spawn.ts';
import { resolveMember } from './binding.ts';
import { SHELL_WAKE_LINE, type HookContext } from './hook-input.ts';

/** How often a waiter checks that its Claude Code and its hook's shell are alive and that it is
 *  still the newest waiter: SIGKILL of `claude`, or of the shell alone, orphans it (no signal
 *  reaches it), so it must notice by itself; it takes no mail meanwhile, because every hand-over
 *  checks first. */
const LIVENESS_MS = 1000;

/** Exit code that makes Claude Code wake the session with the hook's output (asyncRewake). */
const WAKE_EXIT = 2;

/** Non-interactive Claude Code (`-p`, the SDKs: entrypoint `sdk-*`) waits for async hooks before it
 *  exits, so a waiter there would keep it alive: it exits at once instead. */
const interactive = (env: NodeJS.ProcessEnv) => !(env.CLAUDE_CODE_ENTRYPOINT ?? '').startsWith('sdk');

function alive(pid: number): boolean {
  if (!processAlive(processTag(pid))) return false;
  try {
    // An exited process whose parent has not reaped it still answers signal 0.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true; // no /proc (macOS): signal 0 is all there is
  }
}

/** One waiter per Claude Code process (a /clear starts a new session in the same process, and every
 *  turn end starts a waiter): the newest registers itself and stops the one before. */
class Registration {
  private readonly file: string;

  constructor(claudePid: number, env: NodeJS.ProcessEnv) {
    const dir = join(env.XDG_RUNTIME_DIR || tmpdir(), `opencomms-${process.getuid?.() ?? 'user'}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.file = join(dir, `wake-${claudePid}.pid`);
  }

  takeOver() {
    const before = this.holder();
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, String(process.pid));
    renameSync(tmp, this.file);
    if (before && before !== process.pid && isWaiter(before)) {
      try {
        process.kill(before, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  }

  private holder(): number | null {
    try {
      return Number(readFileSync(this.file, 'utf8')) || null;
    } catch {
      return null;
    }
  }

  mine = () => this.holder() === process.pid;

  /** unlinkSync, not rmSync: rmSync loads and runs Node's recursive remover (about half a
   *  millisecond in a waiter, on the wake's path). */
  release() {
    if (!this.mine()) return;
    try {
      unlinkSync(this.file);
    } catch {
      // already gone
    }
  }
}

/** Is `pid` an OpenComms waiter (not a recycled pid)? Only checkable where /proc exists. */
function isWaiter(pid: number): boolean {
  const cmdline = `/proc/${pid}/cmdline`;
  if (!existsSync(cmdline)) return false;
  try {
    const argv = readFileSync(cmdline, 'utf8').split('\0');
    return argv.some((a) => a.endsWith(HOOK_RUNNER)) && argv.includes('wait');
  } catch {
    return false;
  }
}

/** `OPENCOMMS_HOOK_LOG=<file>`: the waiter appends what it does there (never message text), for
 *  anyone asking why a session did or did not wake. */
const diagnostics = (env: NodeJS.ProcessEnv) => {
  const file = env.OPENCOMMS_HOOK_LOG;
  return file
    ? (line: string) => appendFileSync(file, `${new Date().toISOString()} waiter ${process.pid}: ${line}\n`)
    : () => {};
};

/** The hand-over: the batch to stderr, then the exit 2 that makes Claude Code wake the session
 *  (it wakes it once the hook's process has exited). Under the installed command (install.ts
 *  WAIT_CMD) that process is a shell running this one in the background: this one closes its
 *  stderr and tells the shell by a line `wake` on stdout, and the shell exits 2 at once. A Node
 *  process's exit frees its memory first, 4–7 ms of the wake on the development computer and
 *  growing with its heap, a shell's well under one (`npm run bench -- machines`); this one then
 *  exits off the wake's path. Run bare (`shell` null), it exits 2 itself.
 *  Straight to the descriptors, as the hook runner answers: process.stderr would first build a
 *  stream (loading the net and stream modules, about half a millisecond in a waiter) and call back
 *  on a later tick. A pipe that takes less than the whole (non-blocking and full) gets the rest
 *  through the stream, whose callback ends the hand-over. */
function wake(text: string, shell: number | null): Promise<never> {
  const done = () => {
    if (shell === null) process.exit(WAKE_EXIT);
    closeSync(2);
    writeSync(1, `${SHELL_WAKE_LINE}\n`);
    closeSync(1);
    process.exit(0);
  };
  const bytes = Buffer.from(`${text}\n`);
  let sent = 0;
  try {
    for (let n = 1; n > 0 && sent < bytes.length; sent += n) n = writeSync(2, bytes, sent);
  } catch {
    // EAGAIN: the stream writes the rest
  }
  if (sent >= bytes.length) done();
  return new Promise<never>(() => process.stderr.write(bytes.subarray(sent), done));
}

/** A state with more envelopes than this is not copied for a rehearsal: the copy's memory would
 *  cost the waiter's exit more than the rehearsal saves. */
const REHEARSAL_MAX_ENVELOPES = 1_000;
/** The rehearsal's clock runs this far ahead, past the member's delivery cooldown. */
const REHEARSAL_AHEAD_MS = 5_000;

/** A waiter runs its hand-over once (one drain, one commit, then it exits), so every function on
 *  that path would run for the first time in this process, when the mail has come (a waiter
 *  warmed by one hand-over handed the next over ~10 ms sooner). While nothing waits, it rehearses:
 *  a peer's message to its member, sent and drained and framed on a copy of the state in memory,
 *  handed to no one. Nothing of it reaches the store (its server process is readied by
 *  `Store.warm`). Best effort: a member with no peer, or a copy the engine holds (a paused
 *  channel), rehearses less. */
async function rehearse(rt: Runtime, ctx: HookContext, sid: string, log: (line: string) => void) {
  try {
    const state = await rt.peek();
    if (Object.keys(state.messages).length > REHEARSAL_MAX_ENVELOPES) return;
    const r = resolveMember(state, ctx.host, sid);
    const member = r && 'member' in r ? r.member : null;
    const ch = Object.values(state.channels).find(
      (c) => c.lifecycle === 'active' && c.members.some((m) => m.session_id === member),
    );
    const peer = ch?.members.find((m) => m.session_id !== member);
    if (!member || !ch || !peer) return;
    let shown = () => {};
    const handed = new Promise<void>((done) => (shown = done));
    const copy = new Runtime(new MemoryStore(state as State), {
      tag: rt.tag,
      now: () => Date.now() + REHEARSAL_AHEAD_MS,
      log: () => {},
      driver: {
        method: 'push',
        confirmsLater: true,
        maxSize: routeLimit('claude-code', 'wake'),
        owns: (rid) => rid === member,
        deliver: async () => shown(),
      },
    });
    await copy.run({ op: 'send', sid: peer.session_id, args: { channel: ch.name, content: 'rehearsal', to: member } });
    await Promise.race([handed, new Promise((later) => setTimeout(later, 1_000).unref())]);
    await copy.close();
  } catch (e) {
    log(`rehearsal failed: ${(e as Error).message}`);
  }
}

export async function runWaiter(ctx: HookContext): Promise<number> {
  const claudePid = Number(ctx.env.CLAUDE_PID);
  const sid = ctx.input.session_id;
  const log = diagnostics(ctx.env);
  if (!Number.isInteger(claudePid) || claudePid <= 0 || !sid || !interactive(ctx.env) || ctx.host !== 'claude-code') {
    log(`not arming (claude ${ctx.env.CLAUDE_PID}, entrypoint ${ctx.env.CLAUDE_CODE_ENTRYPOINT}, host ${ctx.host})`);
    return 0;
  }
  const reg = new Registration(claudePid, ctx.env);
  reg.takeOver();
  log(
    `armed for session ${sid} of claude ${claudePid} (${ctx.input.hook_event_name}${ctx.input.source ? `:${ctx.input.source}` : ''})`,
  );
  // The shell Claude Code waits on is gone (killed at the hook's timeout): nobody would see a wake.
  const ready = () => alive(claudePid) && reg.mine() && (ctx.shell === null || alive(ctx.shell));

  const rt = openRuntime(ctx.project, {
    deliverOnChange: true,
    tag: processTag(claudePid),
    spawnHosts: SPAWN_HOSTS,
    log,
    driver: {
      method: 'push',
      confirmsLater: true,
      maxSize: routeLimit('claude-code', 'wake'),
      owns: (rid: string, state: Readonly<State>) => {
        const r = resolveMember(state, ctx.host, sid);
        return r !== null && 'member' in r && r.member === rid && ready();
      },
      deliver: (rid, text, ids) => {
        if (!ready()) throw new Error('the Claude Code session ended before the wake');
        log(`waking for ${rid}: ${ids.length} message(s) ${ids.join(' ')}`);
        reg.release();
        return wake(text, ctx.shell);
      },
    },
  });

  let stopping = false;
  const stop = async (why: string) => {
    if (stopping) return;
    stopping = true;
    log(`stopping: ${why}`);
    clearInterval(tick);
    // close() waits for a hand-over already drained: it wakes (exit 2) or, when this waiter may no
    // longer wake, re-queues the batch; no batch is left in flight behind a stopped waiter.
    await rt.close();
    reg.release();
    process.exit(0);
  };
  const tick = setInterval(() => {
    if (!ready())
      void stop(!alive(claudePid) ? 'claude is gone' : reg.mine() ? 'its shell is gone' : 'a newer waiter took over');
  }, LIVENESS_MS);
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => void stop(sig));
  await rt.start();
  // Its member's channels only: a change of another channel wakes no waiter (Store.focus).
  rt.store.focus?.((state) => {
    const r = resolveMember(state, ctx.host, sid);
    return r && 'member' in r ? memberships(state, r.member).map(({ ch }) => ch.name) : [];
  });
  // Readied for the wake while nothing waits: see `rehearse`.
  await rt.store.warm?.();
  await rehearse(rt, ctx, sid, log);
  return new Promise<number>(() => {}); // runs until a wake, a newer waiter, or the end of Claude Code
}
