// Wakes and their cost in real Chromium (operator.md "Wakes and their cost"): a hold another process
// records shows on the agent's row without a reload, with what it cost, and the Release button
// releases it through POST /api/channels/:name/release.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startConsole, type ConsoleServer } from '../../src/console/server.ts';
import type { Caller } from '../../src/engine/index.ts';
import { type State, WakeLineSchema } from '../../src/protocol/schema.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { LAUNCH_HOOK_TIMEOUT_MS, launch, type Browser } from './browser.ts';

/** The ledger's bucket width (src/protocol/limits.ts USAGE_BUCKET_MS). */
const BUCKET_MS = 600_000;
const A = 'sess_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'sess_bbbbbbbbbbbbbbbbbbbbbbbb';

let browser: Browser;
let dir: string;
let server: ConsoleServer;
let page: Page;

beforeAll(async () => void (browser = await launch()), LAUNCH_HOOK_TIMEOUT_MS);
afterAll(async () => {
  await browser?.close();
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-browser-'));
  server = await startConsole({ project: dir, port: 0, log: () => {} });
  page = await browser.page();
  await page.goto(server.url);
  await page.locator('#live', { hasText: 'live' }).waitFor();
  await page.evaluate(() => ((window as unknown as { loadedOnce: boolean }).loadedOnce = true));
});
afterEach(async () => {
  expect(await page.evaluate(() => (window as unknown as { loadedOnce?: boolean }).loadedOnce)).toBe(true);
  await page.close();
  await server.close();
  await rm(dir, { recursive: true, force: true });
  expect(browser.requests.filter((u) => !u.startsWith('http://127.0.0.1:') && !u.startsWith('data:'))).toEqual([]);
  expect(browser.errors).toEqual([]);
});

describe('wakes and their cost on the page', () => {
  it("a loop guard's hold shows on the agent's row with its cost, live; Release releases it", async () => {
    const rt = openRuntime(dir, { log: () => {} });
    try {
      const agent = (sid: string): Caller => ({
        session_id: sid,
        host: 'codex',
        surface: 'mcp',
        delivery_mode: 'pull',
        host_session_id: null,
        project_id: 'local-project',
        worktree: dir,
      });
      await rt.run({ op: 'create', caller: agent(A), args: { channel: 'crew', role: 'Lead', role_prompt: 'l' } });
      await rt.run({ op: 'join', caller: agent(B), args: { channel: 'crew', role: 'Reviewer', role_prompt: 'r' } });
      await rt.run({ op: 'send', sid: A, args: { channel: 'crew', content: 'please review', to: 'Reviewer' } });
      await page.locator('button.card[data-channel="crew"]').click();
      const wakes = page.locator('table.agents .wake');
      await wakes.nth(1).waitFor();
      await expect(wakes.allInnerTexts()).resolves.toEqual(['wakes go', 'wakes go']);

      // Another process records the loop guard's hold: the page shows it without a reload.
      const now = Date.now();
      await rt.store.mutate((draft: State) => {
        const crew = draft.channels.crew!;
        const counters = { wakes: 6, routes: { 'codex/push': 6 }, held: 1, messages: 6, size: 2_400 };
        crew.usage = { [B]: { total: counters, buckets: { [String(now - (now % BUCKET_MS))]: counters } } };
        crew.wakes = {
          [B]: WakeLineSchema.parse({
            at: now,
            chain: 6,
            base: 0,
            starts: [now],
            held_by: 'loop',
            held_since: now,
            held_newest: now,
          }),
        };
        crew.holds[B] = 'loop';
        return { changed: true, result: null };
      });
      await page.locator('table.agents .wake.held').waitFor();
      await expect(wakes.allInnerTexts()).resolves.toEqual(['wakes go', 'held · loop guard']);
      await expect(page.locator('table.agents .wake.held').getAttribute('title')).resolves.toMatch(
        /^Held by the loop guard since \d\d:\d\d:\d\d UTC; 1 message\(s\) wait/,
      );
      await expect(page.locator('table.agents .cost').allInnerTexts()).resolves.toEqual([
        '0 wakes · 0 msg · ~0 tok',
        '6 wakes · 6 msg · ~600 tok',
      ]);
      await expect(page.locator('table.agents .cost').nth(1).getAttribute('title')).resolves.toContain(
        'Last hour: 6 wakes (codex/push 6), 1 held, 6 messages, 2,400 characters, ~600 tokens (estimate: ceil(size / 4))',
      );
      await expect(page.locator('#usage-title').innerText()).resolves.toContain('wake budget 1/240 this hour');

      await page.getByRole('button', { name: 'Release the wakes of Reviewer' }).click();
      await page.locator('#toast', { hasText: 'Released the wakes of Reviewer' }).waitFor();
      await expect(page.locator('#toast').innerText()).resolves.toBe(
        'Released the wakes of Reviewer on "crew": their held mail starts a turn now.',
      );
    } finally {
      await rt.close();
    }
  });
});
