// `opencomms watch --inspect` as a real process: the scenario's transitions, caused by another
// process, reach a local WebSocket receiver as Stately inspection events, in order, as fast as
// watch prints them, and with none of the planted peer text. Without a URL it serves the loopback
// page that shows Stately Inspector; a receiver that is not on this computer is refused.
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { writeBinding } from '../../src/store/binding.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../helpers/postgres.ts';
import type { WatchLine } from '../../src/cli/watch/diff.ts';
import { BIN, start, type Proc } from '../helpers/process.ts';
import { MACHINES } from '../../machines/index.ts';
import { differs, expected, settled, shapeBreaches, summary } from './expect.ts';
import { wsReceiver, type Receiver } from './receiver.ts';
import { leaked, play, setUp, storeText, TOKENS } from './scenario.ts';

const CONFIGS = Object.fromEntries(Object.entries(MACHINES).map(([n, p]) => [n, p.machine.config]));

let dir: string;
let rt: Runtime;
let receiver: Receiver | null = null;
const procs: Proc[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-watch-inspect-'));
  rt = openRuntime(dir);
});
afterEach(async () => {
  for (const p of procs.splice(0)) await p.stop('SIGKILL');
  await receiver?.close();
  await rt.close();
  await rm(dir, { recursive: true, force: true });
});

/** `watch` started and ready; every stdout line with the time it arrived. */
async function watch(extra: string[], env: NodeJS.ProcessEnv = {}) {
  const p = start([BIN, 'watch', '--project', dir, '--json', ...extra], { env });
  procs.push(p);
  const arrived: { at: number; line: string }[] = [];
  let buf = '';
  p.child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      arrived.push({ at: performance.timeOrigin + performance.now(), line: buf.slice(0, nl) });
      buf = buf.slice(nl + 1);
    }
  });
  const until = Date.now() + 15_000;
  while (!p.stderr().includes('Ctrl-C stops')) {
    if (Date.now() > until || p.child.exitCode !== null) throw new Error(`watch did not start: ${p.stderr()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return { p, arrived };
}

describe('opencomms watch --inspect', () => {
  it('sends every transition another process causes to a local WebSocket receiver, within 1 s of watch', async () => {
    await setUp(rt, dir);
    receiver = await wsReceiver();
    const r = receiver;
    const { p, arrived } = await watch(['--inspect', r.url]);
    expect(p.stderr()).toContain(`Stately Inspector: ${r.url}/`);
    // From the moment each step's write returned in this process to the receiver having its mark.
    const sinceWrite: number[] = [];
    const ids = await play(rt, dir, async (step, id) => {
      const wrote = performance.timeOrigin + performance.now();
      const mark = await settled(() => r.events(), step, id);
      sinceWrite.push(r.received[mark]!.at - wrote);
    });
    expect(Math.max(...sinceWrite)).toBeLessThan(1000);
    expect(differs(summary(r.events()), expected(ids))).toBeNull();
    // 0 bytes of peer text: no planted token in any message the receiver got (and the store has them).
    expect(leaked(r.received.map((m) => m.text).join('\n'))).toEqual([]);
    expect(leaked(await storeText(dir))).toEqual(expect.arrayContaining([TOKENS.content1, TOKENS.promptLead]));
    expect(shapeBreaches(r.events(), CONFIGS)).toEqual([]);

    // Each envelope line watch printed, and when the receiver had its inspection event: a SEND is
    // the envelope actor's registration, a PURGE (archived with the save) its stopped snapshot.
    const shown = summary(r.events());
    const lags: number[] = [];
    for (const a of arrived) {
      const l = JSON.parse(a.line) as WatchLine;
      if (l.kind !== 'envelope') continue;
      const id = `envelope:${l.message_id}`;
      const want =
        l.event === 'SEND'
          ? `actor ${id} pending < channel:team`
          : l.event === 'PURGE'
            ? `snapshot ${id} ${l.from} stopped`
            : `event ${id} ${l.event}`;
      const i = shown.indexOf(want);
      expect(i, want).toBeGreaterThanOrEqual(0);
      lags.push(r.received[i]!.at - a.at);
    }
    expect(lags.length).toBe(6); // SEND, DRAIN, SWEEP, SEND, PULL, PURGE
    expect(Math.max(...lags)).toBeLessThan(1000);
    process.stderr.write(
      `[watch --inspect] receiver minus watch stdout, ms: ${lags.map((x) => x.toFixed(1)).join(', ')}; ` +
        `write to first event at the receiver, ms: ${sinceWrite.map((x) => x.toFixed(1)).join(', ')}\n`,
    );
  });

  it('with no URL serves a loopback page that embeds Stately Inspector and streams the events', async () => {
    await setUp(rt, dir);
    const { p } = await watch(['--inspect']);
    const url = /Stately Inspector: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(p.stderr())?.[1];
    expect(url).toBeDefined();
    const page = await (await fetch(url!)).text();
    expect(page).toContain('<iframe id="inspector" src="https://stately.ai/inspect">');
    expect(await (await fetch(new URL('bridge.js', url))).text()).toContain('@statelyai.connected');
    const events = await sse(new URL('events', url), 'actor');
    expect(events).toContain('"sessionId":"channel:team"');
    expect(await status(url!, 'evil.example')).toBe(403);
  });

  it('refuses a receiver that is not on this computer, as data', async () => {
    const p = start([BIN, 'watch', '--project', dir, '--json', '--inspect', 'ws://example.com:8080']);
    procs.push(p);
    expect(await p.exited).not.toBe(0);
    const doc = JSON.parse(p.lines.join('\n'));
    expect(doc).toMatchObject({ ok: false, data: { reason: 'invalid_argument' } });
    expect(doc.message).toContain('"example.com" is not one');
  });

  it("on a project in PostgreSQL: another process's transitions reach the receiver, in order, without peer text", async () => {
    // The binding records no password; both processes get it as a user's environment would.
    const u = new URL(testDatabaseUrl());
    const env = u.password ? { PGPASSWORD: decodeURIComponent(u.password) } : {};
    u.password = '';
    const key = newProjectKey('insp');
    await writeBinding(dir, u.toString(), key);
    await rt.close();
    const saved = process.env.PGPASSWORD;
    Object.assign(process.env, env);
    try {
      rt = openRuntime(dir);
      await setUp(rt, dir);
      receiver = await wsReceiver();
      const r = receiver;
      await watch(['--inspect', r.url], env);
      const sinceWrite: number[] = [];
      const ids = await play(rt, dir, async (step, id) => {
        const wrote = performance.timeOrigin + performance.now();
        sinceWrite.push(r.received[await settled(() => r.events(), step, id)]!.at - wrote);
      });
      expect(differs(summary(r.events()), expected(ids))).toBeNull();
      expect(leaked(r.received.map((m) => m.text).join('\n'))).toEqual([]);
      expect(Math.max(...sinceWrite)).toBeLessThan(1000);
      // The project is in PostgreSQL: no state file was ever written.
      expect(existsSync(join(dir, '.opencomms', 'state.json'))).toBe(false);
      process.stderr.write(
        `[watch --inspect, PostgreSQL] write to first event at the receiver, ms: ${sinceWrite.map((x) => x.toFixed(1)).join(', ')}\n`,
      );
    } finally {
      for (const p of procs.splice(0)) await p.stop('SIGKILL');
      await rt.close();
      rt = openRuntime(dir); // closed again by afterEach
      if (saved === undefined) delete process.env.PGPASSWORD;
      else process.env.PGPASSWORD = saved;
      await dropProject(key);
    }
  }, 60_000);
});

/** The first `inspect` frames of an event stream, until one contains `until`. */
function sse(url: URL, until: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes(until)) {
          req.destroy();
          resolve(text);
        }
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The status of GET / with another Host header (DNS rebinding). */
function status(url: string, host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', reject);
    req.end();
  });
}
