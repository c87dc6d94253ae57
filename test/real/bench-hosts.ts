// Delivery latency of every host in the real binaries, offline, side by side. Run from the repo root
// (after `npm install --prefix test/real`):
//
//   npx tsx test/real/bench-hosts.ts [n]          (n messages per figure, default 20)
//
// Each figure: from the moment the sender's `opencomms_send` returns to the moment the recipient's
// model request carrying the framed message reaches the fake model server.
//   wake        an idle interactive Claude Code (tmux) woken by the asyncRewake waiter
//   spawn       `claude --resume … --print` / `codex exec resume …` run by the sender's MCP server
//   opencode    the OpenCode plugin's push (test/real/bench-opencode.ts, one server), run as a child
// plus the wake's halves: send → batch in flight (the waiter's drain), in flight → model request
// (the waiter's exit 2 and Claude Code's turn start). Sends are spaced past the 1 s per-recipient
// cooldown and wait for the previous turn to end, so the figures are the pipeline, not a queue.
// Prints one JSON line per figure {figure, p50, p95, n, min, max, unit}, then a Markdown table.
import { spawnSync } from 'node:child_process';
import { type Defer, spawnRig, wakeRig } from './claude-harness.ts';
import { REPO_ROOT, makeSandbox } from './env.ts';

const N = Number(process.argv[2] ?? 20);
const WARMUP = 1;
const log = (l: string) => process.stderr.write(`[bench-hosts] ${l}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))]!;
const figures: Array<{ figure: string; p50: number; p95: number; n: number; min: number; max: number; unit: 'ms' }> =
  [];
function emit(figure: string, xs: number[]) {
  const f = {
    figure,
    p50: pct(xs, 50),
    p95: pct(xs, 95),
    n: xs.length,
    min: Math.min(...xs),
    max: Math.max(...xs),
    unit: 'ms' as const,
  };
  figures.push(f);
  console.log(JSON.stringify(f));
}

/** Runs `body` with a sandbox and a cleanup list, newest cleanup first. */
async function withRig(name: string, body: (sb: ReturnType<typeof makeSandbox>, defer: Defer) => Promise<void>) {
  const cleanups: Array<() => unknown> = [];
  const defer: Defer = (v, close) => {
    cleanups.push(() => close(v));
    return v;
  };
  const sb = makeSandbox(name);
  try {
    await body(sb, defer);
  } catch (e) {
    log(`${name} failed: ${(e as Error).message}`);
    process.exitCode = 1;
  } finally {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
    await sleep(500); // processes the rig ended may still be writing into the sandbox
    try {
      sb.cleanup();
    } catch (e) {
      log(`cleanup of ${sb.root}: ${(e as Error).message}`);
    }
  }
}

await withRig('bench-wake', async (sb, defer) => {
  const rig = await wakeRig(sb, defer, 3 * (N + WARMUP) + 4);
  const total: number[] = [],
    drain: number[] = [],
    wake: number[] = [];
  for (let i = 0; i < N + WARMUP; i++) {
    await rig.armed(`before send ${i}`);
    const w = await rig.wake(`bench-${i}`);
    // The woken turn commits detached from its hook: the envelope may still be live, or logged.
    const state = await rig.rt.read();
    const e =
      state.messages[w.id] ??
      (await rig.rt.store.history(state.channels.team!.id, 200)).find((x) => x.message_id === w.id);
    const drainedAt = e?.transitions.find((t) => t[1] === 'in_flight')?.[2] ?? NaN;
    if (i >= WARMUP) {
      total.push(w.ms);
      drain.push(drainedAt - w.at);
      wake.push(w.req.at - drainedAt);
    }
    log(`wake ${i < WARMUP ? 'warm-up' : `${i - WARMUP + 1}/${N}`}: ${w.ms} ms`);
    await sleep(1100);
  }
  emit('claude_code.wake.send_to_model_request', total);
  emit('claude_code.wake.send_to_in_flight', drain);
  emit('claude_code.wake.in_flight_to_model_request', wake);
});

for (const host of ['claude-code', 'codex'] as const)
  await withRig(`bench-spawn-${host}`, async (sb, defer) => {
    const rig = await spawnRig(sb, defer, host, 2 * (N + WARMUP) + 2);
    const xs: number[] = [];
    for (let i = 0; i < N + WARMUP; i++) {
      const d = await rig.deliver(`spawn bench ${i}`);
      if (i >= WARMUP) xs.push(d.ms);
      log(`spawn ${host} ${i < WARMUP ? 'warm-up' : `${i - WARMUP + 1}/${N}`}: ${d.ms} ms`);
      await sleep(1100);
    }
    emit(`${host.replace('-', '_')}.spawn.send_to_model_request`, xs);
  });

log('opencode push: test/real/bench-opencode.ts');
const oc = spawnSync(process.execPath, ['--import', 'tsx', 'test/real/bench-opencode.ts', String(N)], {
  cwd: REPO_ROOT,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
  timeout: 1_200_000,
});
for (const line of oc.stdout.split('\n').filter((l) => l.startsWith('{'))) {
  const f = JSON.parse(line);
  if (f.figure === 'opencode.one_server.tool_end_to_model_request') {
    figures.push(f);
    console.log(line);
  }
}

console.log('\n| delivery | send → recipient model request p50 | p95 | n |\n|---|---|---|---|');
const label: Record<string, string> = {
  'claude_code.wake.send_to_model_request': 'Claude Code, idle session woken (asyncRewake waiter)',
  'claude_code.wake.send_to_in_flight': '  wake: send → batch in flight (waiter drained)',
  'claude_code.wake.in_flight_to_model_request': '  wake: in flight → model request (exit 2 → Claude Code turn)',
  'claude_code.spawn.send_to_model_request': 'Claude Code, spawn_push (`claude --resume --print`)',
  'codex.spawn.send_to_model_request': 'Codex, spawn_push (`codex exec resume`)',
  'opencode.one_server.tool_end_to_model_request': 'OpenCode push (plugin, one server)',
};
for (const f of figures) console.log(`| ${label[f.figure] ?? f.figure} | ${f.p50} ms | ${f.p95} ms | ${f.n} |`);
