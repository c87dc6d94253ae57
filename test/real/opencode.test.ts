// Live OpenCode (FEATURES.md §5.5, §6, §12 LIVE-1..10): the OpenComms plugin, installed by the real
// installer, inside the real `opencode serve` (opencode-ai 1.18.33, plugins run under Bun), driven
// over HTTP, with a scripted fake Chat Completions provider. Everything is asserted on what the
// fake RECEIVED (system text, pushed user turns), on the sessions OpenCode keeps, and on
// `.opencomms/` (state.json + history logs). Each test gets a fresh HOME and project; every spawn
// and HTTP call has a timeout; nothing is skipped (a missing binary fails the test).
//
// Conversations of the fake: session A's first prompt carries `CONV-A`, B's carries `CONV-B`; the
// fake keys every later request of that session by it (user texts accumulate). Message contents
// never carry a marker, so a framed message cannot move a request to the sender's queue.
import { watch } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { frameBatch } from '../../src/framing.ts';
import { tail } from './env.ts';
import type { Sandbox } from './env.ts';
import { lastPrompt, startFakeOpenAIChat } from './fake/index.ts';
import type { FakeServer, Line, ModelRequest, Script } from './fake/index.ts';
import {
  BEGIN,
  END,
  ROLE_HEADER,
  allEnvelopes,
  clearOpenCodeLocks,
  framedIds,
  readState,
  result,
  setupProject,
  sleep,
  startServe,
  textOf,
  toolCalls,
  until,
} from './opencode-harness.ts';
import type { OcMessage, OcServer } from './opencode-harness.ts';

const { defer, sandbox } = useCleanups();
const fakeChat = async (script: Script): Promise<FakeServer> =>
  defer(await startFakeOpenAIChat(script), (f) => f.close());
const serve = async (
  sb: Sandbox,
  env: Record<string, string>,
  fakes: FakeServer[],
  name = 'serve',
  args: string[] = [],
): Promise<OcServer> => defer(await startServe(sb, env, fakes, name, { args }), (s) => s.stop());

const BUILDER_PROMPT = 'ROLE-PROMPT-BUILDER: you write the code and ask the reviewer for reviews.';
const REVIEWER_PROMPT = 'ROLE-PROMPT-REVIEWER: you review every patch you are sent and answer with findings.';
const CREATE = `CALL opencomms_create ${JSON.stringify({ channel: 'review', role: 'Builder', role_prompt: BUILDER_PROMPT })}`;
const JOIN = `CALL opencomms_join ${JSON.stringify({ channel: 'review', role: 'Reviewer', role_prompt: REVIEWER_PROMPT })}`;
const send = (args: Record<string, unknown>) => `CALL opencomms_send ${JSON.stringify({ channel: 'review', ...args })}`;

/** The framed messages a request's LAST user text carries (a pushed turn's text). */
const pushedIds = (r: ModelRequest): string[] => framedIds(lastPrompt(r));
/** Scripted requests of one conversation whose last user text is a pushed OpenComms frame. */
const pushedTurns = (f: FakeServer, conv: string) =>
  f.turns().filter((r) => r.conversation === conv && !r.endsWithToolResult && pushedIds(r).length > 0);
/** User messages of a session that hold a given framed message id. */
const userMessagesWith = (msgs: OcMessage[], id: string) =>
  msgs.filter((m) => m.info.role === 'user' && textOf(m).includes(`id: ${id}`));
/** A reply line for the pushed turn: answers the (first) framed message with a review_response. */
const replyToPushed =
  (content: string): Line =>
  (req) =>
    send({ type: 'review_response', content, reply_to: pushedIds(req)[0] });

const fakeLog = (f: FakeServer) => () =>
  f
    .turns()
    .map(
      (r) =>
        `${new Date(r.at).toISOString()} ${r.conversation} last=${JSON.stringify(lastPrompt(r).slice(0, 80))} tool=${r.endsWithToolResult} -> ${JSON.stringify(r.reply).slice(0, 120)}`,
    )
    .join('\n');

/** One server, sessions A (Builder, creates "review") and B (Reviewer, joins), linked by the fake model's tool calls. */
async function linkedPair(name: string, script: { A: Line[]; B: Line[] }) {
  const sb = sandbox(name);
  const fake = await fakeChat({
    'CONV-A': [CREATE, 'SAY created', ...script.A],
    'CONV-B': [JOIN, 'SAY joined', ...script.B],
  });
  const env = setupProject(sb, fake);
  const s = await serve(sb, env, [fake]);
  const A = (await s.api.createSession('builder')).id;
  const B = (await s.api.createSession('reviewer')).id;
  expect(textOf(await s.api.prompt(A, 'CONV-A create the review channel'))).toBe('created');
  expect(textOf(await s.api.prompt(B, 'CONV-B join the review channel'))).toBe('joined');
  return { sb, fake, s, A, B, env, info: fakeLog(fake) };
}

const inFlightBy = (proj: string, pid: number): string[] => {
  try {
    const st = readState(proj);
    return Object.values(st.messages)
      .filter((e: any) => e.delivery_status === 'in_flight' && String(e.in_flight_by).startsWith(`${pid}@`))
      .map((e: any) => e.message_id);
  } catch {
    return [];
  }
};
let attemptNo = 0;

/**
 * The crash window: the drain persists the batch as in_flight, then the plugin prompts and commits
 * a few ms later. A (on `sender()`) sends to the Reviewer, whose owner is `receiver()`. The test
 * watches .opencomms/ (and polls every ms) and SIGSTOPs the receiver's opencode the moment
 * state.json shows a batch in flight by it; if it is still uncommitted then, SIGKILL (the crash);
 * if the commit won the race, SIGCONT and try again with the next message. Returns the id in flight.
 */
async function crashDuringDelivery(o: {
  sb: Sandbox;
  fake: FakeServer;
  sender: () => OcServer;
  A: string;
  receiver: () => OcServer;
  B: string;
  info: () => string;
}): Promise<string> {
  const { sb, fake, A, B, info } = o;
  const delivered = () => [...allEnvelopes(sb.proj).values()].filter((e) => e.delivery_status === 'delivered').length;
  const attempts: string[] = [];
  for (let k = 0; k < 8; k++) {
    const i = ++attemptNo,
      rx = o.receiver(),
      pid = rx.pid;
    const deliveredBefore = delivered();
    const outcome = new Promise<{ hit: boolean; ids: string[] }>((resolve) => {
      let done = false;
      const finish = (r: { hit: boolean; ids: string[] }) => {
        done = true;
        w.close();
        clearInterval(poll);
        clearInterval(missed);
        resolve(r);
      };
      const check = () => {
        if (done || !inFlightBy(sb.proj, pid).length) return;
        process.kill(pid, 'SIGSTOP');
        const still = inFlightBy(sb.proj, pid);
        process.kill(pid, still.length ? 'SIGKILL' : 'SIGCONT');
        finish({ hit: still.length > 0, ids: still });
      };
      const w = watch(join(sb.proj, '.opencomms'), check);
      const poll = setInterval(check, 1); // in case the watch event comes late
      // The whole delivery happened between two looks: a miss.
      const missed = setInterval(() => {
        if (!done && delivered() > deliveredBefore) finish({ hit: false, ids: [] });
      }, 100);
      defer(null, () => {
        if (!done) finish({ hit: false, ids: [] });
      });
    });
    // Only the call is queued: A's follow-up request (if its server lives to make it) takes the
    // echo fallback, so a killed turn leaves no line behind for the next attempt.
    fake.push(send({ to: 'Reviewer', content: `payload of attempt ${i}` }), 'CONV-A');
    await o.sender().api.promptAsync(A, `CONV-A send attempt ${i}`);
    const r = await Promise.race([outcome, sleep(30_000).then(() => null)]);
    if (!r) throw new Error(`attempt ${i}: the batch never showed up in flight\n${info()}`);
    attempts.push(r.hit ? 'hit' : 'miss');
    if (r.hit) {
      console.log(`[crash window] attempts: ${attempts.join(', ')}`);
      const dead = await rx.proc.done;
      expect(dead.signal ?? dead.code).toBeTruthy();
      expect(r.ids).toHaveLength(1);
      expect(readState(sb.proj).messages[r.ids[0]]).toMatchObject({
        delivery_status: 'in_flight',
        attempts: 1,
        in_flight_by: expect.stringMatching(`^${pid}@`),
      });
      return r.ids[0];
    }
    await until(() => delivered() > deliveredBefore, `attempt ${i} delivered`, 20_000, info);
    await rx.api.idle(B);
    await o.sender().api.idle(A);
  }
  throw new Error(`never caught the drain→commit window: ${attempts.join(', ')}`);
}

describe('live OpenCode: the OpenComms plugin in the real opencode serve', () => {
  it('LIVE-1/2/3/9: two sessions link as Builder/Reviewer; request and response are pushed with no manual wake (2 autonomous turns)', async () => {
    const { sb, fake, s, A, B, info } = await linkedPair('oc-exchange', {
      A: [
        send({ type: 'review_request', content: 'Please review patch P-1 (adds the parser).' }),
        'SAY sent',
        'SAY thanks, merging P-1',
      ],
      B: [replyToPushed('P-1 looks good; one nit in the parser error path.'), 'SAY answered'],
    });

    // LIVE-1: linked, distinct roles and prompts, both owned by this server; no session was created by the plugin.
    const st0 = readState(sb.proj);
    expect(
      st0.channels.review.members.map((m: any) => [
        m.session_id,
        m.role,
        m.role_prompt,
        m.host,
        m.delivery_mode,
        m.owner?.split('@')[0],
      ]),
    ).toEqual([
      [A, 'Builder', BUILDER_PROMPT, 'opencode', 'push', String(s.pid)],
      [B, 'Reviewer', REVIEWER_PROMPT, 'opencode', 'push', String(s.pid)],
    ]);
    expect((await s.api.listSessions()).map((x) => x.id).sort()).toEqual([A, B].sort());

    // The tools are offered under their own names, and the role text rides in the system messages
    // of each linked session's own requests only.
    const [aCreate, aAfter] = fake.turns().filter((r) => r.conversation === 'CONV-A');
    expect(aCreate.tools).toEqual(
      expect.arrayContaining([
        'opencomms_create',
        'opencomms_join',
        'opencomms_send',
        'opencomms_status',
        'opencomms_kick',
      ]),
    );
    expect(aCreate.tools).not.toContain('opencomms_pull');
    const ours = aCreate.tools.filter((t) => t.startsWith('opencomms_'));
    expect([ours.length, new Set(ours).size]).toEqual([16, 16]); // §3.1: 16 tools, each once
    expect(aCreate.system).not.toContain(ROLE_HEADER); // not linked yet
    const roleMsg = (r: ModelRequest) =>
      r.body.messages.filter((m: any) => m.role === 'system' && String(m.content).includes(ROLE_HEADER));
    expect(roleMsg(aAfter)).toHaveLength(1);
    expect(roleMsg(aAfter)[0].content).toBe(
      `${ROLE_HEADER}\nYou are Builder in the OpenComms channel "review".\n${BUILDER_PROMPT}`,
    );

    // LIVE-2/3: A is prompted once more (the send); everything after that is pushed by the plugin.
    const aSend = await s.api.prompt(A, 'CONV-A ask for a review');
    expect(textOf(aSend)).toBe('sent');
    const sent = toolCalls(await s.api.messages(A)).filter((c) => c.tool === 'opencomms_send');
    expect(sent).toHaveLength(1);
    const req = result(sent[0]);
    expect(req, sent[0].output).toMatchObject({
      ok: true,
      data: {
        hop_count: 0,
        delivery_status: 'pending',
        recipients: [{ session_id: B, role: 'Reviewer', delivery_mode: 'push' }],
      },
    });
    const reqId: string = req.data.message_ids[0];

    // The Reviewer's turn (autonomous 1) and the Builder's turn on the answer (autonomous 2).
    const toB = await until(() => pushedTurns(fake, 'CONV-B')[0], 'the review request pushed to B', 30_000, info);
    const toA = await until(() => pushedTurns(fake, 'CONV-A')[0], 'the review response pushed to A', 30_000, info);
    await s.api.idle(A);
    await s.api.idle(B);

    // What the fake received for B: the framed request as a new user turn, B's role text in system.
    const bText = lastPrompt(toB);
    expect(bText).toMatch(
      new RegExp(
        `^\\[OpenComms\\] from Builder \\| type: review_request \\| id: ${reqId} \\| reply_to: none \\| hop: 0 \\| channel: review\\n`,
      ),
    );
    expect(bText).toContain(`${BEGIN}\nPlease review patch P-1 (adds the parser).\n${END}`);
    expect(bText).toContain(`peer session ${A}`);
    expect(toB.system).toContain(
      `${ROLE_HEADER}\nYou are Reviewer in the OpenComms channel "review".\n${REVIEWER_PROMPT}`,
    );
    expect(toB.system).not.toContain(BUILDER_PROMPT);
    expect(toB.userTexts).toEqual(['CONV-B join the review channel', bText]); // no manual prompt in between

    // B answered with reply_to; the Builder got it framed at hop 1, correlated to the request.
    const bCalls = toolCalls(await s.api.messages(B)).filter((c) => c.tool === 'opencomms_send');
    expect(bCalls).toHaveLength(1);
    expect(bCalls[0].input).toMatchObject({ type: 'review_response', reply_to: reqId });
    const resp = result(bCalls[0]);
    expect(resp, bCalls[0].output).toMatchObject({
      ok: true,
      data: { hop_count: 1, correlation_id: req.data.correlation_id },
    });
    const respId: string = resp.data.message_ids[0];
    const aText = lastPrompt(toA);
    expect(aText).toMatch(
      new RegExp(
        `^\\[OpenComms\\] from Reviewer \\| type: review_response \\| id: ${respId} \\| reply_to: ${reqId} \\| hop: 1 \\| channel: review\\n`,
      ),
    );
    expect(aText).toContain(`${BEGIN}\nP-1 looks good; one nit in the parser error path.\n${END}`);
    expect(toA.system).toContain(BUILDER_PROMPT);
    expect(toA.system).not.toContain(REVIEWER_PROMPT);

    // The sessions as OpenCode keeps them: each pushed message is exactly one new user turn.
    const aMsgs = await s.api.messages(A),
      bMsgs = await s.api.messages(B);
    expect(userMessagesWith(bMsgs, reqId)).toHaveLength(1);
    expect(userMessagesWith(aMsgs, respId)).toHaveLength(1);
    expect(bMsgs.filter((m) => m.info.role === 'user')).toHaveLength(2); // join prompt + pushed request
    expect(aMsgs.filter((m) => m.info.role === 'user')).toHaveLength(3); // create, send, pushed response
    expect(textOf(aMsgs.at(-1)!)).toBe('thanks, merging P-1');
    expect(pushedTurns(fake, 'CONV-B')).toHaveLength(1); // exactly one request each: no duplicate push
    expect(pushedTurns(fake, 'CONV-A')).toHaveLength(1);

    // State: both envelopes delivered by push, in one thread.
    const envs = await until(
      () => {
        const m = allEnvelopes(sb.proj);
        return [m.get(reqId), m.get(respId)].every((e) => e?.delivery_status === 'delivered') ? m : null;
      },
      'both envelopes delivered in state/history',
      10_000,
    );
    expect(envs.get(reqId)).toMatchObject({
      recipient_session_id: B,
      sender_session_id: A,
      hop_count: 0,
      delivery_method: 'push',
      attempts: 1,
      reply_to: null,
    });
    expect(envs.get(respId)).toMatchObject({
      recipient_session_id: A,
      sender_session_id: B,
      hop_count: 1,
      delivery_method: 'push',
      attempts: 1,
      reply_to: reqId,
      correlation_id: req.data.correlation_id,
      root_message_id: reqId,
    });
    const st = readState(sb.proj);
    expect(st.queues).toEqual({});
    expect(st.channels.review.delivered_total).toBe(2);
    expect(st.errors).toEqual([]);

    // LIVE-2: each session can still be prompted on its own.
    expect(textOf(await s.api.prompt(B, 'a plain question for B'))).toMatch(/^echo: a plain question for B$/);
  }, 240_000);

  it('LIVE-4/5: mail for a busy session waits for its idle event, then arrives once, FIFO, in one pushed turn', async () => {
    const { sb, fake, s, A, B, info } = await linkedPair('oc-busy', {
      A: [
        send({ content: 'first: the build is green' }),
        send({ content: 'second: please look at the flaky test' }),
        'SAY sent both',
      ],
      B: ['DELAY 4000 SAY done working', 'SAY got your two messages'],
    });
    // B starts a slow turn (the fake answers after 4 s) and is busy until it ends.
    await s.api.promptAsync(B, 'CONV-B long task');
    const work = await until(
      () => fake.turns().find((r) => lastPrompt(r) === 'CONV-B long task'),
      "B's slow turn at the fake",
      20_000,
      info,
    );
    // A sends twice meanwhile; both wait for B.
    expect(textOf(await s.api.prompt(A, 'CONV-A send two'))).toBe('sent both');
    const sends = toolCalls(await s.api.messages(A))
      .filter((c) => c.tool === 'opencomms_send')
      .map(result);
    expect(sends.map((r) => r.ok)).toEqual([true, true]);
    const [m1, m2] = sends.map((r) => r.data.message_ids[0] as string);
    expect(work.repliedAt, "A finished before B's slow reply (else the test proves nothing)").toBeUndefined();
    expect((await s.api.status())[B]?.type).toBe('busy');
    const held = readState(sb.proj);
    expect(held.queues[B]).toEqual([m1, m2]);
    expect([held.messages[m1].delivery_status, held.messages[m2].delivery_status]).toEqual(['pending', 'pending']);
    expect(pushedTurns(fake, 'CONV-B')).toEqual([]);

    // After the busy turn: one pushed turn holding both, in send order.
    const pushed = await until(() => pushedTurns(fake, 'CONV-B')[0], 'the held mail pushed to B', 30_000, info);
    await s.api.idle(B);
    expect(pushedIds(pushed)).toEqual([m1, m2]);
    const text = lastPrompt(pushed);
    expect(text.indexOf('first: the build is green')).toBeLessThan(
      text.indexOf('second: please look at the flaky test'),
    );
    expect(text.split(BEGIN)).toHaveLength(3);
    expect(text).toContain('\n\n---\n\n');
    expect(pushed.at).toBeGreaterThanOrEqual(work.repliedAt!);
    // Never during the turn: the pushed user message was created after the busy turn completed.
    const bMsgs = await s.api.messages(B);
    const busyTurn = bMsgs.find((m) => m.info.role === 'assistant' && textOf(m) === 'done working')!;
    const [pushedMsg] = userMessagesWith(bMsgs, m1);
    expect(userMessagesWith(bMsgs, m1)).toHaveLength(1);
    expect(userMessagesWith(bMsgs, m2)).toEqual([pushedMsg]);
    expect(pushedMsg.info.time.created).toBeGreaterThanOrEqual(busyTurn.info.time.completed!);
    expect(textOf(bMsgs.at(-1)!)).toBe('got your two messages');

    // Once: OpenCode reports every idle twice (session.status idle + session.idle); nothing is
    // pushed again, not even after more idle events.
    await s.api.prompt(B, 'CONV-B another turn (more idle events)');
    await sleep(1500);
    expect(pushedTurns(fake, 'CONV-B')).toHaveLength(1);
    expect(userMessagesWith(await s.api.messages(B), m1)).toHaveLength(1);
    const envs = allEnvelopes(sb.proj);
    expect(
      [m1, m2].map((id) => [envs.get(id)?.delivery_status, envs.get(id)?.attempts, envs.get(id)?.delivery_method]),
    ).toEqual([
      ['delivered', 1, 'push'],
      ['delivered', 1, 'push'],
    ]);
  }, 240_000);

  it('LIVE-10: two opencode serve processes on one project: each delivers the mail of its own session (owner side)', async () => {
    const sb = sandbox('oc-two');
    // One fake per server: a request reaching fake2 ran in server 2.
    const fake1 = await fakeChat({
      'CONV-A': [
        CREATE,
        'SAY created',
        send({ type: 'review_request', content: 'cross-server review please' }),
        'SAY sent',
        'SAY thanks',
      ],
    });
    const fake2 = await fakeChat({
      'CONV-B': [JOIN, 'SAY joined', replyToPushed('reviewed across servers'), 'SAY answered'],
    });
    const env = setupProject(sb, fake1);
    const envFor = (f: FakeServer) => ({
      ...env,
      OPENCODE_CONFIG_CONTENT: JSON.stringify({ provider: { fake: { options: { baseURL: `${f.url}/v1` } } } }),
    });
    const s1 = await serve(sb, envFor(fake1), [fake1], 'server1');
    const s2 = await serve(sb, envFor(fake2), [fake2], 'server2');
    expect(s1.pid).not.toBe(s2.pid);
    const info = () =>
      `fake1:\n${fakeLog(fake1)()}\nfake2:\n${fakeLog(fake2)()}\nserver1:\n${tail(s1.proc.stderr(), 1500)}\nserver2:\n${tail(s2.proc.stderr(), 1500)}`;
    const A = (await s1.api.createSession('builder on server 1')).id;
    const B = (await s2.api.createSession('reviewer on server 2')).id;
    expect(textOf(await s1.api.prompt(A, 'CONV-A create the review channel'))).toBe('created');
    expect(textOf(await s2.api.prompt(B, 'CONV-B join the review channel'))).toBe('joined');
    const owners = () =>
      Object.fromEntries(
        readState(sb.proj).channels.review.members.map((m: any) => [m.role, Number(m.owner.split('@')[0])]),
      );
    expect(owners()).toEqual({ Builder: s1.pid, Reviewer: s2.pid });

    const t0 = performance.now();
    expect(textOf(await s1.api.prompt(A, 'CONV-A ask for a review'))).toBe('sent');
    const reqCall = toolCalls(await s1.api.messages(A)).find((c) => c.tool === 'opencomms_send')!;
    const reqId = result(reqCall).data.message_ids[0];
    const toB = await until(() => pushedTurns(fake2, 'CONV-B')[0], 'the request pushed to B by server 2', 30_000, info);
    const toA = await until(
      () => pushedTurns(fake1, 'CONV-A')[0],
      'the response pushed to A by server 1',
      30_000,
      info,
    );
    await s1.api.idle(A);
    await s2.api.idle(B);
    expect(pushedIds(toB)).toEqual([reqId]);
    expect(lastPrompt(toA)).toContain(`reply_to: ${reqId} | hop: 1`);
    // Owner side, not the 5 s cross-server fallback: B's turn ran in server 2 (its provider) well before 5 s.
    expect(toB.at - reqCall.end).toBeLessThan(5000);
    const mentions = (f: FakeServer, marker: string) =>
      f.turns().filter((r) => r.userTexts.some((t) => t.includes(marker)));
    expect(mentions(fake1, 'CONV-B')).toEqual([]); // no turn of B ever ran in server 1
    expect(mentions(fake2, 'CONV-A')).toEqual([]);
    expect(fake1.turns().filter((r) => pushedIds(r).includes(reqId))).toEqual([]);
    expect(userMessagesWith(await s2.api.messages(B), reqId)).toHaveLength(1);
    expect(owners()).toEqual({ Builder: s1.pid, Reviewer: s2.pid });
    await sleep(Math.max(0, 5500 - (performance.now() - t0))); // past the fallback: still exactly one push each way
    expect(pushedTurns(fake2, 'CONV-B')).toHaveLength(1);
    expect(pushedTurns(fake1, 'CONV-A')).toHaveLength(1);
    const envs = [...allEnvelopes(sb.proj).values()];
    expect(envs.map((e) => [e.message_type, e.delivery_status, e.attempts])).toEqual([
      ['review_request', 'delivered', 1],
      ['review_response', 'delivered', 1],
    ]);
    expect(readState(sb.proj).errors).toEqual([]);

    // The fallback fires only for ownerless push members: with server 2 gone, server 1 hands
    // B's mail over itself after CROSS_SERVER_FALLBACK_MS (degraded: B's turn runs in server 1,
    // whose provider is fake1; the fake answers it from its default queue).
    await s2.stop();
    fake1.push(send({ content: 'anyone there after server 2 stopped?' }), 'CONV-A');
    fake1.push('SAY sent again', 'CONV-A');
    expect(textOf(await s1.api.prompt(A, 'CONV-A send once more'))).toBe('sent again');
    const again = toolCalls(await s1.api.messages(A))
      .filter((c) => c.tool === 'opencomms_send')
      .at(-1)!;
    const againId = result(again).data.message_ids[0];
    await sleep(3000);
    expect(allEnvelopes(sb.proj).get(againId)?.delivery_status).toBe('pending'); // not before the fallback delay
    const viaFallback = await until(
      () => fake1.turns().find((r) => pushedIds(r).includes(againId)),
      'the fallback push through server 1',
      20_000,
      info,
    );
    expect(viaFallback.at - again.end).toBeGreaterThanOrEqual(5000);
    expect(viaFallback.userTexts[0]).toBe('CONV-B join the review channel'); // B's own session, now run by server 1
    await s1.api.idle(B);
    expect(userMessagesWith(await s1.api.messages(B), againId)).toHaveLength(1);
    expect(allEnvelopes(sb.proj).get(againId)).toMatchObject({
      delivery_status: 'delivered',
      delivery_method: 'push',
      attempts: 1,
    });
  }, 240_000);

  it('LIVE-6/7: pause holds delivery and resume releases it; disconnect stops traffic and deletes no host session', async () => {
    const { sb, fake, s, A, B, info } = await linkedPair('oc-pause', {
      A: [
        send({ content: 'held while paused' }),
        'CALL opencomms_pause {"channel":"review"}',
        'SAY paused',
        'CALL opencomms_resume {"channel":"review"}',
        'SAY resumed',
        send({ content: 'sent while the reviewer is leaving' }),
        'SAY sent',
        send({ content: 'nobody left to read this' }),
        'SAY refused',
      ],
      B: [
        'DELAY 4000 SAY working',
        'SAY got the held mail',
        'DELAY 3000 CALL opencomms_disconnect {"channel":"review"}',
        'SAY left',
      ],
    });
    const aCalls = async (tool: string) => toolCalls(await s.api.messages(A)).filter((c) => c.tool === tool);

    // Pause: a message queued while B is busy, then the channel paused; B's idle releases nothing.
    await s.api.promptAsync(B, 'CONV-B long task');
    const work = await until(
      () => fake.turns().find((r) => lastPrompt(r) === 'CONV-B long task'),
      "B's slow turn",
      20_000,
      info,
    );
    expect(textOf(await s.api.prompt(A, 'CONV-A send, then pause'))).toBe('paused');
    expect(work.repliedAt, 'A paused before B turned idle').toBeUndefined();
    const m1 = result((await aCalls('opencomms_send'))[0]).data.message_ids[0];
    expect(result((await aCalls('opencomms_pause'))[0])).toMatchObject({
      ok: true,
      data: { paused: true, changed: true },
    });
    await s.api.idle(B);
    await sleep(2500); // well past the idle events and the 1 s cooldown
    expect(pushedTurns(fake, 'CONV-B')).toEqual([]);
    let st = readState(sb.proj);
    expect(st.channels.review.paused).toBe(true);
    expect(st.queues[B]).toEqual([m1]);
    expect(st.messages[m1].delivery_status).toBe('pending');

    // Resume: delivery continues, once.
    expect(textOf(await s.api.prompt(A, 'CONV-A resume'))).toBe('resumed');
    expect(result((await aCalls('opencomms_resume'))[0])).toMatchObject({
      ok: true,
      data: { paused: false, changed: true },
    });
    const released = await until(() => pushedTurns(fake, 'CONV-B')[0], 'the held mail after resume', 20_000, info);
    expect(pushedIds(released)).toEqual([m1]);
    await s.api.idle(B);
    expect(allEnvelopes(sb.proj).get(m1)).toMatchObject({ delivery_status: 'delivered', attempts: 1 });

    // Disconnect: B leaves (in a slow turn) while A's next message waits for it; that mail is
    // rejected, never pushed, and nothing else reaches B.
    await s.api.promptAsync(B, 'CONV-B leave the channel');
    const leaving = await until(
      () => fake.turns().find((r) => lastPrompt(r) === 'CONV-B leave the channel'),
      "B's leaving turn",
      20_000,
      info,
    );
    expect(textOf(await s.api.prompt(A, 'CONV-A send while B leaves'))).toBe('sent');
    expect(leaving.repliedAt).toBeUndefined();
    const m2 = result((await aCalls('opencomms_send'))[1]).data.message_ids[0];
    await s.api.idle(B);
    const disc = toolCalls(await s.api.messages(B)).filter((c) => c.tool === 'opencomms_disconnect');
    expect(disc.map(result)).toEqual([
      expect.objectContaining({
        ok: true,
        data: expect.objectContaining({ channel_removed: false, remaining_members: 1 }),
      }),
    ]);
    await sleep(2500);
    expect(pushedTurns(fake, 'CONV-B').map(pushedIds)).toEqual([[m1]]);
    expect(allEnvelopes(sb.proj).get(m2)?.delivery_status).toBe('rejected');
    st = readState(sb.proj);
    expect(st.channels.review.members.map((m: any) => m.session_id)).toEqual([A]);
    expect(st.queues).toEqual({});
    // Traffic stopped: the next send has nobody to go to.
    expect(textOf(await s.api.prompt(A, 'CONV-A try again'))).toBe('refused');
    expect(result((await aCalls('opencomms_send'))[2])).toMatchObject({ ok: false, data: { reason: 'no_recipient' } });
    // No host session was deleted, and B is a plain session again (no role text).
    expect((await s.api.getSession(B)).status).toBe(200);
    expect((await s.api.listSessions()).map((x) => x.id).sort()).toEqual([A, B].sort());
    expect(textOf(await s.api.prompt(B, 'CONV-B are you still there'))).toBe('echo: CONV-B are you still there');
    expect(
      fake
        .turns()
        .filter((r) => r.conversation === 'CONV-B')
        .at(-1)!.system,
    ).not.toContain(ROLE_HEADER);
    expect(
      fake
        .turns()
        .filter((r) => r.conversation === 'CONV-A')
        .at(-1)!.system,
    ).toContain(ROLE_HEADER);
  }, 240_000);

  it('LNK-10 + §6.6: child sessions cannot link; /OpenComms through the real command route links, reports, and is what the model sees; a deleted session goes stale', async () => {
    const SLASH_PROMPT = 'ROLE-PROMPT-SLASH: review what the builder sends.';
    const sb = sandbox('oc-slash');
    const fake = await fakeChat({
      'CONV-A': [
        CREATE,
        'SAY created',
        send({ content: 'hello to the slash-joined reviewer' }),
        'SAY sent',
        send({ content: 'are you still there?' }),
        'SAY refused',
      ],
      'CONV-K': [
        `CALL opencomms_join ${JSON.stringify({ channel: 'review', role: 'Child', role_prompt: 'a child session' })}`,
        'SAY tried',
      ],
      [SLASH_PROMPT]: ['SAY noted the join', 'SAY noted the status', 'SAY got the hello'],
    });
    const env = setupProject(sb, fake);
    const s = await serve(sb, env, [fake]);
    const info = fakeLog(fake);
    const A = (await s.api.createSession('builder')).id;
    expect(textOf(await s.api.prompt(A, 'CONV-A create the review channel'))).toBe('created');

    // A child session (parentID) is refused, and nothing is written.
    const child = await s.api.call('POST', '/session', { title: 'child of builder', parentID: A });
    expect(child.data.parentID).toBe(A);
    expect(textOf(await s.api.prompt(child.data.id, 'CONV-K join as a child'))).toBe('tried');
    expect(toolCalls(await s.api.messages(child.data.id)).map(result)).toEqual([
      expect.objectContaining({ ok: false, data: { reason: 'child_session' } }),
    ]);
    expect(readState(sb.proj).channels.review.members).toHaveLength(1);

    // The plugin's config hook declares the command; `/OpenComms Join …` links a plain session.
    const commands = await s.api.call('GET', '/command');
    expect(commands.data.map((c: any) => c.name)).toContain('OpenComms');
    const B = (await s.api.createSession('reviewer')).id;
    const command = (args: string) =>
      s.api.call('POST', `/session/${B}/command`, { command: 'OpenComms', arguments: args }, 60_000);
    expect((await command(`Join Channel=review As=Reviewer ${SLASH_PROMPT}`)).status).toBe(200);
    const member = readState(sb.proj).channels.review.members[1];
    expect([member.session_id, member.role, member.role_prompt]).toEqual([B, 'Reviewer', SLASH_PROMPT]);
    // The turn carries the command's result, not the raw command line (output.parts is used).
    const joinTurn = fake.turns().filter((r) => r.conversation === SLASH_PROMPT)[0];
    expect(lastPrompt(joinTurn)).toBe('OpenComms: Joined "review" as Reviewer (2 members).');
    expect(joinTurn.system).toContain(
      `${ROLE_HEADER}\nYou are Reviewer in the OpenComms channel "review".\n${SLASH_PROMPT}`,
    );
    expect((await command('Status')).status).toBe(200);
    const statusText = lastPrompt(fake.turns().filter((r) => r.conversation === SLASH_PROMPT)[1]);
    expect(statusText).toMatch(/^OpenComms: /);
    expect(statusText).toContain(`Builder (${A}`);
    expect(statusText).toContain(`Reviewer (${B}`);

    // The slash-linked session receives pushed mail like any other.
    expect(textOf(await s.api.prompt(A, 'CONV-A say hello'))).toBe('sent');
    const pushed = await until(
      () => pushedTurns(fake, SLASH_PROMPT)[0],
      'mail pushed to the slash-joined session',
      20_000,
      info,
    );
    expect(lastPrompt(pushed)).toContain(`${BEGIN}\nhello to the slash-joined reviewer\n${END}`);
    await s.api.idle(B);

    // Deleting the host session marks the member stale (session.deleted); sends to it are refused.
    expect((await s.api.deleteSession(B)).status).toBe(200);
    await until(
      () => readState(sb.proj).channels.review.members.find((m: any) => m.session_id === B)?.stale === true,
      'B marked stale',
      10_000,
    );
    expect(textOf(await s.api.prompt(A, 'CONV-A try the deleted one'))).toBe('refused');
    expect(
      result(
        toolCalls(await s.api.messages(A))
          .filter((c) => c.tool === 'opencomms_send')
          .at(-1)!,
      ),
    ).toMatchObject({ ok: false, data: { reason: 'recipient_stale' } });
  }, 240_000);

  it('LIVE-8 + DLV-6: kill -9 between drain and commit; after a restart the batch is delivered once; a deleted session is marked stale, never replaced', async () => {
    const sb = sandbox('oc-restart');
    const OBSERVER = 'ROLE-PROMPT-OBSERVER: you watch.';
    const fake = await fakeChat({
      'CONV-A': [CREATE, 'SAY created'],
      'CONV-B': [JOIN, 'SAY joined'],
      'CONV-C': [
        `CALL opencomms_join ${JSON.stringify({ channel: 'review', role: 'Observer', role_prompt: OBSERVER })}`,
        'SAY joined',
      ],
    });
    const env = setupProject(sb, fake);
    let s = await serve(sb, env, [fake], 'server1');
    const info = () => `${fakeLog(fake)()}\n${tail(s.proc.stderr(), 2000)}`;
    const [A, B, C] = [
      (await s.api.createSession('builder')).id,
      (await s.api.createSession('reviewer')).id,
      (await s.api.createSession('observer')).id,
    ];
    for (const [id, conv] of [
      [A, 'CONV-A'],
      [B, 'CONV-B'],
      [C, 'CONV-C'],
    ])
      expect(textOf(await s.api.prompt(id, `${conv} link up`))).toMatch(/created|joined/);
    expect(readState(sb.proj).channels.review.members.map((m: any) => m.role)).toEqual([
      'Builder',
      'Reviewer',
      'Observer',
    ]);

    // The crash window: the drain persists the batch as in_flight, then the plugin prompts and
    // commits a few ms later. The test watches .opencomms/ and SIGSTOPs the server the moment
    // state.json shows the batch in flight; if it is still uncommitted then, SIGKILL (crash);
    // if the commit won the race, SIGCONT and try again with the next message.
    const crash = () => crashDuringDelivery({ sb, fake, sender: () => s, A, receiver: () => s, B, info });
    /** Plugin-less server on the same HOME and project (`--pure`): changes only the host's side. */
    const whileDown = async (fn: (pure: OcServer) => Promise<void>) => {
      clearOpenCodeLocks(sb);
      const pure = await serve(sb, env, [fake], 'pure', ['--pure']);
      await fn(pure);
      await pure.stop();
    };
    const restart = async () => {
      clearOpenCodeLocks(sb);
      s = await serve(sb, env, [fake], 'restarted');
      // `opencode serve` instantiates a project (and loads its plugins) on the first request for
      // it, not at start: a client's first call does that (the TUI makes one at once).
      await s.api.listSessions();
    };
    const deliveredOnce = async (id: string) => {
      const e = await until(
        () => {
          const x = allEnvelopes(sb.proj).get(id);
          return x?.delivery_status === 'delivered' ? x : null;
        },
        `${id} delivered after the restart`,
        60_000,
        info,
      );
      expect(e).toMatchObject({ delivery_method: 'push', attempts: 2, recipient_session_id: B });
      await sleep(500);
      await until(async () => !(await s.api.status())[B], 'B not busy', 30_000);
      expect(userMessagesWith(await s.api.messages(B), id)).toHaveLength(1);
    };
    const modelRequestsWith = (id: string) =>
      fake.turns().filter((r) => !r.endsWithToolResult && pushedIds(r).includes(id)).length;

    // Crash 1: killed before the prompt reached OpenCode. Meanwhile session C is deleted through
    // the plugin-less server: only the start-up roster validation can notice.
    const id1 = await crash();
    const before1 = modelRequestsWith(id1);
    await whileDown(async (pure) => {
      expect((await pure.api.deleteSession(C)).status).toBe(200);
      expect((await pure.api.getSession(C)).status).toBe(404);
    });
    const untouched = readState(sb.proj);
    expect(untouched.messages[id1].delivery_status).toBe('in_flight'); // --pure loaded no plugin: nothing swept yet
    expect(untouched.channels.review.members.find((m: any) => m.session_id === C).stale).toBe(false);
    await restart();
    await deliveredOnce(id1); // re-queued by the sweep, then prompted (it was not in B)
    expect([before1, modelRequestsWith(id1)]).toEqual([0, 1]);

    // State survived; C is stale and reported, not replaced; A and B are adopted by the new server.
    const st = readState(sb.proj);
    const members = st.channels.review.members;
    expect(members.map((m: any) => [m.session_id, m.role, m.stale])).toEqual([
      [A, 'Builder', false],
      [B, 'Reviewer', false],
      [C, 'Observer', true],
    ]);
    expect(members.filter((m: any) => !m.stale).map((m: any) => Number(m.owner.split('@')[0]))).toEqual([s.pid, s.pid]);
    expect(st.errors.map((e: any) => e.message)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Sweep: 1 in-flight envelope\(s\) of ended processes re-queued/),
        expect.stringContaining(`OpenCode session ${C} (Observer on "review") vanished; marked stale, not replaced.`),
      ]),
    );
    expect((await s.api.listSessions()).map((x) => x.id).sort()).toEqual([A, B].sort());
    expect((await s.api.status())[A]).toBeUndefined(); // A's turn died with the server: A is idle, not stuck

    // Crash 2, the ambiguous window: the prompt had reached OpenCode, the commit had not. It is
    // reproduced by putting the batch's exact text into B while the server is down (the kill
    // mostly lands before the prompt, as above; under load the prompt sometimes gets through
    // first, and then B already holds it). After the restart the redelivery finds the id in B and
    // commits without prompting again.
    const id2 = await crash();
    const e2 = readState(sb.proj).messages[id2];
    await whileDown(async (pure) => {
      if (userMessagesWith(await pure.api.messages(B), id2).length) return;
      const r = await pure.api.call('POST', `/session/${B}/message`, {
        noReply: true,
        parts: [{ type: 'text', text: frameBatch([e2], () => 'review') }],
      });
      expect(r.status, JSON.stringify(r.data)).toBe(200);
    });
    expect(
      userMessagesWith(
        await (async () => {
          await restart();
          return s.api.messages(B);
        })(),
        id2,
      ),
    ).toHaveLength(1);
    await deliveredOnce(id2);
    expect(modelRequestsWith(id2)).toBe(0); // never prompted again (and the injected turn had no reply)

    // And the pair keeps working on the restarted server.
    fake.push(send({ to: 'Reviewer', content: 'after the restarts' }), 'CONV-A');
    fake.push('SAY sent', 'CONV-A');
    expect(textOf(await s.api.prompt(A, 'CONV-A one more after the restarts'))).toBe('sent');
    const last = toolCalls(await s.api.messages(A))
      .filter((c) => c.tool === 'opencomms_send')
      .at(-1)!;
    const lastId = result(last).data.message_ids[0];
    await until(
      () => fake.turns().find((r) => pushedIds(r).includes(lastId)),
      'a push after the restarts',
      20_000,
      info,
    );
  }, 300_000);

  it('DLV-6, ambiguous window + newer mail: the re-drained batch prompts only the frames the session does not hold', async () => {
    // B's server (1) dies after its prompt reached OpenCode but before the commit; while it is
    // down, A (on server 2) sends again. After server 1 comes back, the sweep re-queues the old
    // envelope in front of the new one and both leave in ONE batch, flagged as a redelivery.
    const sb = sandbox('oc-mixed');
    const fake = await fakeChat({ 'CONV-A': [CREATE, 'SAY created'], 'CONV-B': [JOIN, 'SAY joined'] });
    const env = setupProject(sb, fake);
    let s1 = await serve(sb, env, [fake], 'server1 (B)');
    const s2 = await serve(sb, env, [fake], 'server2 (A)');
    const info = () => `${fakeLog(fake)()}\nserver2:\n${tail(s2.proc.stderr(), 1500)}`;
    const B = (await s1.api.createSession('reviewer')).id;
    const A = (await s2.api.createSession('builder')).id;
    expect(textOf(await s2.api.prompt(A, 'CONV-A create the review channel'))).toBe('created');
    expect(textOf(await s1.api.prompt(B, 'CONV-B join the review channel'))).toBe('joined');

    const m1 = await crashDuringDelivery({ sb, fake, sender: () => s2, A, receiver: () => s1, B, info });
    // The prompt had reached OpenCode: the batch's exact text is in B, put there through server 2
    // unless the prompt itself got through before the kill landed (under load it sometimes does).
    const e1 = readState(sb.proj).messages[m1];
    if (!userMessagesWith(await s2.api.messages(B), m1).length) {
      const put = await s2.api.call('POST', `/session/${B}/message`, {
        noReply: true,
        parts: [{ type: 'text', text: frameBatch([e1], () => 'review') }],
      });
      expect(put.status, JSON.stringify(put.data)).toBe(200);
    }
    // Newer mail while B's server is down: held behind the in-flight batch.
    fake.push(send({ to: 'Reviewer', content: 'newer mail while server 1 was down' }), 'CONV-A');
    await s2.api.prompt(A, 'CONV-A send while server 1 is down');
    const m2 = result(
      toolCalls(await s2.api.messages(A))
        .filter((c) => c.tool === 'opencomms_send')
        .at(-1)!,
    ).data.message_ids[0];
    await sleep(1500);
    expect([allEnvelopes(sb.proj).get(m1)?.delivery_status, allEnvelopes(sb.proj).get(m2)?.delivery_status]).toEqual([
      'in_flight',
      'pending',
    ]);

    clearOpenCodeLocks(sb);
    s1 = await serve(sb, env, [fake], 'server1 restarted');
    await s1.api.listSessions(); // instantiates the project: the plugin starts and sweeps
    await until(
      () => [m1, m2].every((id) => allEnvelopes(sb.proj).get(id)?.delivery_status === 'delivered'),
      'both delivered',
      30_000,
      info,
    );
    expect(allEnvelopes(sb.proj).get(m1)).toMatchObject({ attempts: 2, delivery_method: 'push' });
    const pushed = await until(
      () => pushedTurns(fake, 'CONV-B').find((r) => pushedIds(r).includes(m2)),
      'the new mail pushed',
      20_000,
      info,
    );
    expect(pushedIds(pushed)).toEqual([m2]); // m1's frame was left out: B already holds it
    await until(async () => !(await s1.api.status())[B] && !(await s2.api.status())[B], 'B idle', 20_000);
    const bMsgs = await s2.api.messages(B);
    expect(userMessagesWith(bMsgs, m1)).toHaveLength(1);
    expect(userMessagesWith(bMsgs, m2)).toHaveLength(1);
  }, 300_000);
});
