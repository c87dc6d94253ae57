// The console's "Inspect in Stately" button in real Chromium (docs/stately.md): the window it opens
// gets the channel's inspection events by postMessage, as Stately Inspector would. The window here
// is a local receiver page on 127.0.0.1 that speaks the browser inspector's side of the protocol
// (`@statelyai.connected` to its opener, then keeps every inspection event), so nothing reaches the
// internet. A send, a drain and a sweep, a pull, a pause and a save arrive in order, each within
// 1 s of the write, and none of the planted peer text does.
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startConsole, type ConsoleServer } from '../../src/console/server.ts';
import { startBridge } from '../../src/inspect/bridge.ts';
import { inspectStore } from '../../src/inspect/send.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import { MACHINES } from '../../machines/index.ts';
import { differs, expected, settled, shapeBreaches, summary } from '../stately/expect.ts';
import { leaked, play, setUp, storeText, TOKENS } from '../stately/scenario.ts';
import { LAUNCH_HOOK_TIMEOUT_MS, launch, type Browser } from './browser.ts';

/** What `createBrowserReceiver` of @statelyai/inspect does in Stately's page, and a record of it. */
const RECEIVER = `<!doctype html><title>receiver</title><script>
window.received = [];
window.addEventListener('message', (e) => {
  const d = e.data;
  if (d && typeof d.type === 'string' && typeof d._version === 'string')
    window.received.push({ at: performance.timeOrigin + performance.now(), origin: e.origin, text: JSON.stringify(d) });
});
(window.opener || window.parent).postMessage({ type: '@statelyai.connected' }, '*');
</script>`;

let browser: Browser;
let receiverServer: Server;
let receiverUrl: string;
let dir: string;
let rt: Runtime;
let server: ConsoleServer;
let page: Page;

beforeAll(async () => {
  browser = await launch();
  receiverServer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(RECEIVER));
  await new Promise<void>((r) => receiverServer.listen(0, '127.0.0.1', () => r()));
  receiverUrl = `http://127.0.0.1:${(receiverServer.address() as AddressInfo).port}/inspect`;
}, LAUNCH_HOOK_TIMEOUT_MS);
afterAll(async () => {
  await browser?.close();
  await new Promise((r) => receiverServer?.close(r));
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-browser-inspect-'));
  rt = openRuntime(dir);
  server = await startConsole({ project: dir, port: 0, log: () => {}, inspectorUrl: receiverUrl });
  page = await browser.page();
});
afterEach(async () => {
  await page.close();
  await server.close();
  await rt.close();
  await rm(dir, { recursive: true, force: true });
  expect(browser.requests.filter((u) => !u.startsWith('http://127.0.0.1:') && !u.startsWith('data:'))).toEqual([]);
  expect(browser.errors).toEqual([]);
});

type Got = { at: number; origin: string; text: string };
const CONFIGS = Object.fromEntries(Object.entries(MACHINES).map(([n, p]) => [n, p.machine.config]));

describe('Inspect in Stately (console)', () => {
  it("relays the channel's actors, events and snapshots to the inspector window, in order, without peer text", async () => {
    await setUp(rt, dir);
    await page.goto(server.url);
    await page.locator('#live', { hasText: 'live' }).waitFor();
    await page.locator('button.card[data-channel="team"]').click();
    const opened = page.waitForEvent('popup');
    await page.getByRole('button', { name: 'Inspect in Stately' }).click();
    const win = await opened;
    expect(win.url()).toBe(receiverUrl);
    const got = () => win.evaluate(() => (window as unknown as { received: Got[] }).received);
    const events = async () => (await got()).map((g) => JSON.parse(g.text) as StatelyInspectionEvent);

    const sinceWrite: number[] = [];
    const ids = await play(rt, dir, async (step, id) => {
      const wrote = performance.timeOrigin + performance.now();
      const mark = await settled(events, step, id);
      sinceWrite.push((await got())[mark]!.at - wrote);
    });
    expect(differs(summary(await events()), expected(ids))).toBeNull();
    const all = await got();
    expect(new Set(all.map((g) => g.origin))).toEqual(new Set([`http://127.0.0.1:${server.port}`]));
    expect(leaked(all.map((g) => g.text).join('\n'))).toEqual([]);
    expect(leaked(await storeText(dir))).toEqual(expect.arrayContaining([TOKENS.content1, TOKENS.promptLead]));
    expect(shapeBreaches(await events(), CONFIGS)).toEqual([]);
    expect(Math.max(...sinceWrite)).toBeLessThan(1000);
    process.stderr.write(
      `[console inspect] write to the inspector window, ms: ${sinceWrite.map((x) => x.toFixed(1)).join(', ')}\n`,
    );
    await win.close();
  });

  it('a channel that is not live is answered 404 with a reason', async () => {
    const r = await fetch(new URL('/api/channels/nope/inspect', server.url));
    expect(r.status).toBe(404);
    expect(await r.json()).toMatchObject({ ok: false, data: { reason: 'channel_not_found' } });
  });

  it("watch --inspect's loopback page: the inspector in its frame gets the same events, in order, without peer text", async () => {
    await setUp(rt, dir);
    const bridge = await startBridge({ inspectorUrl: receiverUrl });
    const sub = await inspectStore(rt.store, bridge.inspector, { log: () => {} });
    try {
      await page.goto(bridge.url);
      const frame = () => page.frames().find((f) => f.url() === receiverUrl);
      const until = Date.now() + 5000;
      while (!frame()) {
        if (Date.now() > until) throw new Error('no inspector frame');
        await new Promise((r) => setTimeout(r, 10));
      }
      const got = () => frame()!.evaluate(() => (window as unknown as { received: Got[] }).received ?? []);
      const events = async () => (await got()).map((g) => JSON.parse(g.text) as StatelyInspectionEvent);
      const ids = await play(rt, dir, async (step, id) => void (await settled(events, step, id)));
      expect(differs(summary(await events()), expected(ids))).toBeNull();
      const all = await got();
      expect(new Set(all.map((g) => g.origin))).toEqual(new Set([new URL(bridge.url).origin]));
      expect(leaked(all.map((g) => g.text).join('\n'))).toEqual([]);
      expect(shapeBreaches(await events(), CONFIGS)).toEqual([]);
    } finally {
      await sub.close();
      await bridge.close();
    }
  });
});
