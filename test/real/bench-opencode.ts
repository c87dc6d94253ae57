// Push latency of the OpenComms plugin in the real `opencode serve` (opencode-ai 1.18.33), offline
// with the fake Chat Completions provider. Run from the repo root (after `npm install --prefix test/real`):
//
//   npx tsx test/real/bench-opencode.ts [n]        (n messages per setup, default 20)
//
// Prints one JSON line per figure on stdout: {figure, p50, p95, n, min, max} in ms; progress goes
// to stderr. The main figure is `tool_end_to_model_request`: from the moment OpenCode marks the
// Builder's `opencomms_send` tool call completed (its tool part's `time.end`) to the moment the
// Reviewer session's model request carrying the framed message reaches the fake provider. The
// breakdown uses the envelope's own times: `timestamp` (send), its DRAIN transition (the batch
// persisted in flight), `delivered_at` (commit after the host accepted the prompt). Every clock is this host's Date.now().
// Sends are spaced past the 1000 ms per-recipient delivery cooldown and wait for the Reviewer to be
// idle again, so the figures are the pipeline itself, not the cooldown or a busy recipient.
import { makeSandbox } from './env.ts';
import type { Sandbox } from './env.ts';
import { lastPrompt, startFakeOpenAIChat } from './fake/index.ts';
import type { FakeServer } from './fake/index.ts';
import {
  allEnvelopes,
  framedIds,
  result,
  setupProject,
  sleep,
  startServe,
  textOf,
  toolCalls,
  until,
} from './opencode-harness.ts';
import type { OcServer } from './opencode-harness.ts';

const N = Number(process.argv[2] ?? 20);
const WARMUP = 2;
const log = (l: string) => process.stderr.write(`[bench-opencode] ${l}\n`);

const CREATE = `CALL opencomms_create ${JSON.stringify({ channel: 'bench', role: 'Builder', role_prompt: 'You send benchmark messages.', rate_limit: 1000 })}`;
const JOIN = `CALL opencomms_join ${JSON.stringify({ channel: 'bench', role: 'Reviewer', role_prompt: 'You receive benchmark messages.' })}`;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

function emit(figure: string, xs: number[]) {
  console.log(
    JSON.stringify({
      figure,
      p50: pct(xs, 50),
      p95: pct(xs, 95),
      n: xs.length,
      min: Math.min(...xs),
      max: Math.max(...xs),
      unit: 'ms',
    }),
  );
}

interface Setup {
  label: string;
  sb: Sandbox;
  /** Where A runs and its fake; where B runs and its fake (the same on one server). */
  sA: OcServer;
  fA: FakeServer;
  sB: OcServer;
  fB: FakeServer;
  close(): Promise<void>;
}

async function oneServer(): Promise<Setup> {
  const sb = makeSandbox('bench-oc1');
  const f = await startFakeOpenAIChat({ 'CONV-A': [CREATE, 'SAY created'], 'CONV-B': [JOIN, 'SAY joined'] });
  const env = setupProject(sb, f);
  const s = await startServe(sb, env, [f], 'server', { timeoutMs: 600_000 });
  return {
    label: 'one_server',
    sb,
    sA: s,
    fA: f,
    sB: s,
    fB: f,
    async close() {
      await s.stop();
      await f.close();
      sb.cleanup();
    },
  };
}

async function twoServers(): Promise<Setup> {
  const sb = makeSandbox('bench-oc2');
  const f1 = await startFakeOpenAIChat({ 'CONV-A': [CREATE, 'SAY created'] });
  const f2 = await startFakeOpenAIChat({ 'CONV-B': [JOIN, 'SAY joined'] });
  const env = setupProject(sb, f1);
  const envFor = (f: FakeServer) => ({
    ...env,
    OPENCODE_CONFIG_CONTENT: JSON.stringify({ provider: { fake: { options: { baseURL: `${f.url}/v1` } } } }),
  });
  const s1 = await startServe(sb, envFor(f1), [f1], 'server1', { timeoutMs: 600_000 });
  const s2 = await startServe(sb, envFor(f2), [f2], 'server2', { timeoutMs: 600_000 });
  return {
    label: 'two_servers',
    sb,
    sA: s1,
    fA: f1,
    sB: s2,
    fB: f2,
    async close() {
      await s1.stop();
      await s2.stop();
      await f1.close();
      await f2.close();
      sb.cleanup();
    },
  };
}

async function measure(setup: Setup) {
  const { sA, fA, sB, fB, sb } = setup;
  const A = (await sA.api.createSession('bench builder')).id;
  const B = (await sB.api.createSession('bench reviewer')).id;
  if (textOf(await sA.api.prompt(A, 'CONV-A create')) !== 'created') throw new Error('create failed');
  if (textOf(await sB.api.prompt(B, 'CONV-B join')) !== 'joined') throw new Error('join failed');
  const figs: Record<string, number[]> = {
    tool_end_to_model_request: [],
    send_to_drain: [],
    drain_to_commit: [],
    commit_to_model_request: [],
  };
  for (let i = 0; i < N + WARMUP; i++) {
    fA.push(
      `CALL opencomms_send ${JSON.stringify({ channel: 'bench', content: `bench message ${i} of ${setup.label}` })}`,
      'CONV-A',
    );
    fA.push('SAY sent', 'CONV-A');
    await sA.api.prompt(A, `CONV-A send ${i}`);
    const call = toolCalls(await sA.api.messages(A))
      .filter((c) => c.tool === 'opencomms_send')
      .at(-1)!;
    const r = result(call);
    if (!r.ok) throw new Error(`send ${i} refused: ${call.output}`);
    const id: string = r.data.message_ids[0];
    const req = await until(
      () => fB.turns().find((t) => !t.endsWithToolResult && framedIds(lastPrompt(t)).includes(id)),
      `message ${i} at the fake`,
      30_000,
    );
    const env = await until(
      () => {
        const e = allEnvelopes(sb.proj).get(id);
        return e?.delivery_status === 'delivered' ? e : null;
      },
      `message ${i} committed`,
      10_000,
    );
    await sB.api.idle(B);
    const drainedAt: number = (env.transitions ?? []).find((t: [string, string, number]) => t[1] === 'in_flight')?.[2];
    if (i >= WARMUP) {
      figs.tool_end_to_model_request!.push(req.at - call.end);
      figs.send_to_drain!.push(drainedAt - env.timestamp);
      figs.drain_to_commit!.push(env.delivered_at - drainedAt);
      figs.commit_to_model_request!.push(req.at - env.delivered_at);
    }
    log(
      `${setup.label} ${i < WARMUP ? 'warm-up' : i - WARMUP + 1}/${N}: tool end → model request ${req.at - call.end} ms`,
    );
    await sleep(1100); // past the per-recipient delivery cooldown
  }
  for (const [k, xs] of Object.entries(figs))
    if (xs.every((x) => Number.isFinite(x))) emit(`opencode.${setup.label}.${k}`, xs);
}

for (const make of [oneServer, twoServers]) {
  const setup = await make();
  try {
    await measure(setup);
  } catch (e) {
    log(`${setup.label} failed: ${(e as Error).message}\n${setup.sA.proc.stderr().slice(-2000)}`);
    process.exitCode = 1;
  } finally {
    await setup.close();
  }
}
