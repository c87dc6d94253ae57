// Live wake of an idle Codex 0.171.0 TUI (in tmux, against the fake Responses server, offline)
// run through the real `opencomms codex` launcher, with OpenComms installed by the real CLI and
// the hooks trusted through Codex's own review dialog (so the TUI runs on Codex's background
// server). A peer sends through MCP; with no keystroke the fake server receives a turn whose
// prompt is the fixed wake prompt and whose hook context holds the framed message, each message
// once. Typing holds the wake and a half-typed line survives it; pause holds it; Esc and Ctrl-C
// act as in plain Codex; a SIGKILLed launcher or Codex leaves no process and no mail taken.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { spawn as ptySpawn } from '@lydell/node-pty';
import { describe, expect, it } from 'vitest';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { useCleanups } from './cleanups.ts';
import { OPENCOMMS, frameIds, joinTeam, leadTeam, opencomms, startPeer, until, type Defer } from './claude-harness.ts';
import { trustCodexHooks } from './codex-review.ts';
import { bin, configureCodex, namespaced, trustCodexProject, type Sandbox } from './env.ts';
import { startFakeResponses, type ModelRequest } from './fake/index.ts';
import { startTerminal, type Terminal } from './tmux.ts';

const { defer, sandbox } = useCleanups();
const newPin = () => `sess_${randomBytes(12).toString('hex')}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WAKE_PROMPT =
  /^\[OpenComms\] New messages for this session arrived \(wake \d+@[^\s()]+\)\. They are in the context that follows\.$/;

/** The input items a request adds after its newest user message: where Codex puts that prompt's
 *  hook context (developer messages). */
function afterLastUser(req: ModelRequest): { prompt: string; context: string } {
  const input: any[] = Array.isArray(req.body.input) ? req.body.input : [];
  const at = (input as any).findLastIndex((i: any) => (i.type ?? 'message') === 'message' && i.role === 'user');
  const text = (i: any) => (Array.isArray(i?.content) ? i.content.map((c: any) => c.text ?? '').join('\n') : '');
  return {
    prompt: text(input[at]),
    context: input
      .slice(at + 1)
      .filter((i) => i.role === 'developer')
      .map(text)
      .join('\n'),
  };
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

/** Processes whose command line names this sandbox (launcher, Codex, hooks), but not Codex's own
 *  background server, which plain Codex leaves running too. */
function sandboxProcesses(sb: Sandbox): Array<{ pid: number; cmd: string }> {
  const out: Array<{ pid: number; cmd: string }> = [];
  for (const p of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ').trim();
      const env = readFileSync(`/proc/${p}/environ`, 'utf8');
      if ((cmd.includes(sb.root) || env.includes(sb.root)) && !/app-server/.test(cmd) && !/tmux/.test(cmd))
        out.push({ pid: Number(p), cmd });
    } catch {
      // gone
    }
  }
  return out;
}

/** Codex's background server processes of this sandbox (stopped in cleanup). */
function daemons(sb: Sandbox): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => {
      try {
        return (
          readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(join(sb.home, '.codex')) &&
          readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('app-server')
        );
      } catch {
        return false;
      }
    });
}

const pids = (pattern: RegExp, sb: Sandbox) =>
  sandboxProcesses(sb)
    .filter((p) => pattern.test(p.cmd))
    .map((p) => p.pid);

async function rig(sb: Sandbox, defer: Defer) {
  const fake = defer(
    await startFakeResponses(
      Array.from(
        { length: 200 },
        () => (req: ModelRequest) =>
          afterLastUser(req).prompt.includes('[slow]') ? 'DELAY 8000 SAY slow done' : 'SAY ok',
      ),
    ),
    (f) => f.close(),
  );
  const env = configureCodex(sb, fake);
  trustCodexProject(sb, env);
  defer(sb, () => {
    for (const p of daemons(sb)) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });
  const member = newPin(),
    lead = newPin();
  await opencomms(sb, 'install', 'codex');
  await opencomms(sb, 'install-member', '--host', 'codex', '--id', member);
  const peer = defer(await startPeer(sb, lead, 'team'), (p) => p.close());
  await leadTeam(peer);
  const rt = defer(openRuntime(sb.proj, { log: () => {} }), (r) => r.close());
  await joinTeam(rt, sb, member, 'codex', { role: 'Coder', role_prompt: 'You code.' });
  const launcherLog = join(sb.root, 'launcher.log');
  const termEnv = {
    ...env,
    TERM: 'xterm-256color',
    OPENCOMMS_CODEX_BIN: bin('codex'),
    OPENCOMMS_LAUNCHER_LOG: launcherLog,
  };
  const row = async () => (await rt.read()).channels.team!.members.find((m) => m.session_id === member)!;
  const open = async (launcher: boolean, review = false, extra: string[] = []): Promise<Terminal> => {
    const [cmd, args] = launcher ? [process.execPath, [OPENCOMMS, 'codex', ...extra]] : [bin('codex'), extra];
    const term = defer(
      await startTerminal(cmd, args, {
        cwd: sb.proj,
        env: termEnv,
        timeoutMs: 600_000,
        forward: [fake.port],
        cols: 120,
        rows: 40,
      }),
      (t) => t.close(),
    );
    // Codex's review of the project's hooks (once per hook set): trusting them is the user's step.
    if (review) await trustCodexHooks(term, env.CODEX_HOME!);
    await term.waitScreen(/Ask Codex/, 40_000);
    return term;
  };
  const info = (term?: Terminal) => () =>
    `launcher.log:\n${existsSync(launcherLog) ? readFileSync(launcherLog, 'utf8') : ''}\nfake turns:\n${fake
      .turns()
      .map(
        (r) =>
          `${r.at} ${JSON.stringify(afterLastUser(r).prompt.slice(0, 100))} ctx ${frameIds(afterLastUser(r).context).join(',')}`,
      )
      .join('\n')}\nscreen:\n${term?.screen() ?? ''}`;
  return { fake, env, peer, rt, member, lead, row, open, info, launcherLog };
}

/** Types like a person: the text, a breath, then Enter (Codex reads a burst ending in Enter as a paste). */
async function submit(term: Terminal, text: string) {
  term.keys('-l', text);
  await sleep(300);
  term.keys('Enter');
}

/** The composer line (`› …`) at the bottom of the screen. */
const composer = (screen: string) =>
  screen
    .split('\n')
    .filter((l) => l.startsWith('› '))
    .at(-1) ?? '';

/** Terminal output without its control sequences (a word apart from the next by a cursor move). */
const plainText = (s: string) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, ' ');

/** A client in a pseudo-terminal of the test's own, for timing: every output chunk is seen as it
 *  arrives (no screen polling between the key and its echo). */
async function ptySession(argv: string[], o: { cwd: string; env: Record<string, string> }) {
  const p = ptySpawn(argv[0]!, argv.slice(1), { name: 'xterm-256color', cols: 120, rows: 40, cwd: o.cwd, env: o.env });
  let out = '';
  const listeners = new Set<() => void>();
  p.onData((d) => {
    out += d;
    for (const l of listeners) l();
  });
  const waitFor = (test: (s: string) => boolean, ms: number) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!test(out)) return;
        listeners.delete(check);
        clearTimeout(t);
        resolve();
      };
      const t = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`pty: timeout ${ms} ms; output tail ${JSON.stringify(out.slice(-400))}`));
      }, ms);
      listeners.add(check);
      check();
    });
  return {
    p,
    waitFor,
    output: () => out,
    /** Writes one key and resolves with the ms until output holding it arrives. */
    async echo(key: string): Promise<number> {
      const from = out.length;
      const t0 = performance.now();
      p.write(key);
      await waitFor((s) => s.slice(from).includes(key), 5000);
      return performance.now() - t0;
    },
    close: () => p.kill('SIGKILL'),
  };
}

/** Esc during a running turn, Ctrl-C on a draft, Ctrl-C twice on an empty composer: what shows. */
async function keysBehaviour(term: Terminal, marker: string) {
  await submit(term, `[slow] ${marker}`);
  await term.waitScreen(/esc to interrupt/i, 15_000);
  term.keys('Escape');
  const interrupted = /interrupt/i.test(
    await term.waitScreen(/Conversation interrupted|interrupted/i, 10_000).catch(() => term.screen()),
  );
  await term.waitScreen(/Ask Codex/, 15_000);
  await sleep(1500);
  term.keys('-l', 'half a thought');
  await term.waitScreen(/› half a thought/, 5000);
  term.keys('C-c');
  await sleep(500);
  const draftCleared = !/half a thought/.test(composer(term.screen()));
  // Ctrl-C twice on the empty composer (the second within Codex's "again to quit" window).
  term.keys('C-c');
  await sleep(200);
  term.keys('C-c');
  // Codex says how to reconnect as it exits.
  const exited = await term.waitScreen(/To reconnect, run:/, 15_000).then(
    () => true,
    () => false,
  );
  return { interrupted, draftCleared, exited };
}

describe('Codex 0.171.0 TUI through `opencomms codex`: an idle session is woken with its mail', () => {
  it('wakes with no keystroke, each message once, never under the typing user, not while paused; keys act as in plain Codex; a killed launcher or Codex leaves nothing', async () => {
    const sb = sandbox('oc-codex-wake');
    const r = await rig(sb, defer);
    // A plain Codex kept open the whole test: it starts Codex's background server inside its own
    // network namespace (which relays to the fake model), so the server outlives the sessions
    // this test ends. It also answers Codex's hook review.
    await r.open(false, true);
    await until("Codex's background server runs", () => daemons(sb).length > 0, 30_000);
    const holder = new Set(sandboxProcesses(sb).map((p) => p.pid));
    const term = await r.open(true);
    const info = r.info(term);
    // The first prompt binds the thread (Codex runs SessionStart lazily, at the first prompt).
    await submit(term, 'hello');
    const thread = (await until('the thread is bound', async () => (await r.row()).host_session_id, 30_000, info))!;
    await sleep(1500);

    const wake = async (label: string, timeoutMs = 15_000) => {
      const { id, at } = await r.peer.send(`${label}: please acknowledge`);
      const req = await until(
        `the fake model receives ${label} with no keystroke`,
        () => r.fake.turns().find((q) => frameIds(afterLastUser(q).context).includes(id)),
        timeoutMs,
        info,
      );
      expect(afterLastUser(req).prompt).toMatch(WAKE_PROMPT);
      expect(afterLastUser(req).context).toContain(
        `<<<UNTRUSTED_PEER_MESSAGE>>>\n${label}: please acknowledge\n<<<END_UNTRUSTED_PEER_MESSAGE>>>`,
      );
      await until(`${label}'s turn is over`, () => !!req.repliedAt, 10_000, info);
      await term.waitScreen(/Ask Codex/, 10_000);
      return { id, at, req, ms: req.at - at };
    };
    /** Until the turn (its Stop hook included) is over: Codex shows "esc to interrupt" while it runs. */
    const settle = async () => {
      await until(
        'the turn is over',
        async () => {
          if (/esc to interrupt/.test(term.screen())) return false;
          await sleep(700);
          return !/esc to interrupt/.test(term.screen());
        },
        30_000,
        info,
      );
      await sleep(1200);
    };

    // Three in a row, then more for the latency figure.
    const woken = [];
    for (let i = 1; i <= 10; i++) {
      woken.push(await wake(`wake-${i}`));
      await settle();
    }
    const ms = woken.map((w) => w.ms);
    const log = readFileSync(r.launcherLog, 'utf8');
    const split = woken.map((w) => {
      const queued = Date.parse(new RegExp(`^(\\S+) .*${w.id}`, 'm').exec(log)?.[1] ?? '');
      return `${queued - w.at}+${w.req.at - queued}`;
    });
    console.log(`[codex-wake] send → queued + queued → model request (ms): ${split.join(', ')}`);
    console.log(
      `[codex-wake] send → model request (ms): ${ms.join(', ')}; p50 ${percentile(ms, 50)}, p95 ${percentile(ms, 95)}`,
    );
    const committed = async (id: string) => {
      const state = await r.rt.read();
      return state.messages[id]
        ? false
        : (await r.rt.store.history(state.channels.team!.id, 200)).find((x) => x.message_id === id);
    };
    for (const { id } of woken) {
      expect(await until(`${id} committed`, () => committed(id), 10_000, info), id).toMatchObject({
        delivery_status: 'delivered',
        delivery_method: 'push',
        attempts: 1,
      });
      expect(
        r.fake.turns().filter((q) => frameIds(afterLastUser(q).context).includes(id)),
        id,
      ).toHaveLength(1);
    }
    // The thread's whole history, as the model gets it: each frame once.
    const all = (r.fake.turns().at(-1)!.body.input as any[])
      .filter((i) => i.role === 'developer')
      .flatMap((i) => frameIds(JSON.stringify(i.content)));
    for (const { id } of woken)
      expect(
        all.filter((x) => x === id),
        id,
      ).toHaveLength(1);

    // Typing holds the wake; the half-typed line survives it, unsent and unchanged.
    term.keys('-l', 'draft');
    const typing = await r.peer.send('typed-over: please acknowledge');
    let lastKey = 0;
    for (let i = 0; i < 10; i++) {
      await sleep(300);
      term.keys('-l', 'x');
      lastKey = Date.now();
      expect(
        r.fake.turns().some((q) => frameIds(afterLastUser(q).context).includes(typing.id)),
        'woken while the user typed',
      ).toBe(false);
    }
    const held = await until(
      'the wake after the typing stopped',
      () => r.fake.turns().find((q) => frameIds(afterLastUser(q).context).includes(typing.id)),
      15_000,
      info,
    );
    expect(held.at - lastKey).toBeGreaterThanOrEqual(1500);
    await until('the woken turn is over', () => !!held.repliedAt, 10_000, info);
    await sleep(500);
    expect(composer(term.screen())).toBe('› draftxxxxxxxxxx');
    expect(r.fake.turns().some((q) => q.userTexts.some((t) => t.includes('draftx')))).toBe(false);
    term.keys('Enter');
    await until(
      'the draft is sent by its Enter',
      () => r.fake.turns().find((q) => afterLastUser(q).prompt === 'draftxxxxxxxxxx'),
      10_000,
      info,
    );
    await term.waitScreen(/Ask Codex/, 10_000);
    await settle();

    // Pause holds the wake (a paused channel refuses sends: the mail is sent while the user types,
    // which holds it, and the channel is paused before the typing stops); resume releases it.
    term.keys('-l', 'p');
    const paused = await r.peer.send('while paused');
    expect((await r.rt.run({ op: 'pause', sid: r.lead, args: { channel: 'team' } })).ok).toBe(true);
    await sleep(4000);
    expect(
      r.fake.turns().some((q) => frameIds(afterLastUser(q).context).includes(paused.id)),
      'woken while paused',
    ).toBe(false);
    expect((await r.rt.read()).messages[paused.id]).toMatchObject({ delivery_status: 'pending', attempts: 0 });
    expect((await r.rt.run({ op: 'resume', sid: r.lead, args: { channel: 'team' } })).ok).toBe(true);
    await until(
      'the wake after resume',
      () => r.fake.turns().find((q) => frameIds(afterLastUser(q).context).includes(paused.id)),
      15_000,
      info,
    );
    await term.waitScreen(/Ask Codex|› p/, 10_000);
    term.keys('C-c');
    await settle();

    // Esc and Ctrl-C in plain Codex and through the launcher.
    const plain = await r.open(false);
    const keysPlain = await keysBehaviour(plain, 'plain');
    const keysLauncher = await keysBehaviour(term, 'launched');
    console.log(`[codex-wake] keys: plain ${JSON.stringify(keysPlain)}, launcher ${JSON.stringify(keysLauncher)}`);
    expect(keysLauncher, `${info()}\n${JSON.stringify(sandboxProcesses(sb))}`).toEqual(keysPlain);
    expect(keysLauncher).toEqual({ interrupted: true, draftCleared: true, exited: true });
    await until(
      'the launcher exited with Codex',
      () => pids(/^\S*node \S*opencomms\.js codex/, sb).length === 0,
      5000,
      info,
    );

    // kill -9 of the launcher: Codex goes with it (its terminal hangs up), nothing is left, and mail
    // sent afterwards is not taken; the next launcher on the thread wakes it.
    const others = /opencomms-mcp\.mjs|opencomms\.js mcp|netns-exec/;
    const left = () => sandboxProcesses(sb).filter((p) => !others.test(p.cmd) && !holder.has(p.pid));
    await r.open(true, false, ['resume', thread]);
    await sleep(3000);
    const [launcher] = pids(/^\S*node \S*opencomms\.js codex/, sb);
    expect(launcher).toBeTruthy();
    process.kill(launcher!, 'SIGKILL');
    await until(
      'no launcher, Codex or hook process is left',
      () => left().length === 0,
      10_000,
      () => JSON.stringify(left()),
    );
    const orphan = await r.peer.send('after the launcher was killed');
    await sleep(2000);
    expect((await r.rt.read()).messages[orphan.id]).toMatchObject({ delivery_status: 'pending', attempts: 0 });
    const t3 = await r.open(true, false, ['resume', thread]);
    await until(
      'the next launcher wakes the thread with the waiting mail',
      () => r.fake.turns().find((q) => frameIds(afterLastUser(q).context).includes(orphan.id)),
      20_000,
      () => `${info()}\nt3:\n${t3.screen()}`,
    );
    await t3.waitScreen(/Ask Codex/, 10_000);
    await sleep(1500);

    // kill -9 of Codex: the launcher ends too and leaves nothing, nothing in flight.
    const codex = pids(/\/bin\/codex( |$)/, sb).filter((p) => !holder.has(p));
    expect(codex.length).toBeGreaterThan(0);
    for (const p of codex) process.kill(p, 'SIGKILL');
    const killedAt = new Date().toISOString();
    await t3.waitExit(10_000).then(
      (how) => expect(how, 'the launcher ends with the status of killed Codex').toBe('status 137'),
      (e: Error) => {
        const procs = sandboxProcesses(sb).filter((p) => !holder.has(p.pid));
        throw new Error(
          `${e.message}\nCodex killed at ${killedAt}; processes left: ${JSON.stringify(procs)}\n${info()}`,
        );
      },
    );
    await until(
      'no launcher, Codex or hook process is left',
      () => left().length === 0,
      10_000,
      () => JSON.stringify(left()),
    );
    const last = await r.peer.send('after Codex was killed');
    await sleep(2000);
    expect((await r.rt.read()).messages[last.id]).toMatchObject({ delivery_status: 'pending', attempts: 0 });
    expect(Object.values((await r.rt.read()).messages).filter((e) => e.delivery_status === 'in_flight')).toEqual([]);
  }, 420_000);

  it('passes keystrokes through with the echo latency of plain Codex', async () => {
    const sb = sandbox('oc-codex-echo');
    const r = await rig(sb, defer);
    const env = {
      ...r.env,
      TERM: 'xterm-256color',
      OPENCOMMS_CODEX_BIN: bin('codex'),
      OPENCOMMS_LAUNCHER_LOG: r.launcherLog,
    };
    // The timing needs no hook: without them Codex shows no hook review, and the launcher's waiter
    // still runs (its member is pinned and joined).
    rmSync(join(sb.proj, '.codex', 'hooks.json'));
    const start = async (cmd: string, args: string[]) => {
      const ns = defer(await namespaced(cmd, args, { forward: [r.fake.port] }), (n) => n.close());
      const s = defer(await ptySession(ns.argv, { cwd: sb.proj, env }), (x) => x.close());
      await s.waitFor((o) => /Ask\s+Codex/.test(plainText(o)), 40_000);
      await sleep(2000);
      return s;
    };
    const launched = await start(process.execPath, [OPENCOMMS, 'codex']);
    const plain = await start(bin('codex'), []);
    // Alternating keys, so that both see the same load on the machine.
    const times: Record<'plain' | 'launched', number[]> = { plain: [], launched: [] };
    const KEYS = 200;
    for (let i = 0; i < KEYS; i++) {
      times.plain.push(await plain.echo('z'));
      times.launched.push(await launched.echo('z'));
      await sleep(20);
    }
    const fmt = (xs: number[]) => `${percentile(xs, 50).toFixed(1)}/${percentile(xs, 95).toFixed(1)}`;
    console.log(
      `[codex-wake] keystroke echo p50/p95 (ms): plain ${fmt(times.plain)}, launcher ${fmt(times.launched)}, launcher − plain p95 ${(percentile(times.launched, 95) - percentile(times.plain, 95)).toFixed(1)}`,
    );
    expect(times.launched).toHaveLength(KEYS);
    expect(existsSync(r.launcherLog) ? readFileSync(r.launcherLog, 'utf8') : '').not.toMatch(
      /no Codex member|waiter not started|not waking/,
    );
  }, 180_000);
});
