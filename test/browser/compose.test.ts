// The operator writes to the agents from the console (operator.md "Speaking to the agents"): the
// compose box sends as Operator, framed like every message; what the operator is typing survives a
// live re-render (an SSE update from another process); a refusal says what to do.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startConsole, type ConsoleServer } from '../../src/console/server.ts';
import { startMcp, type McpHandle } from '../helpers/mcp-client.ts';
import { LAUNCH_HOOK_TIMEOUT_MS, launch, type Browser } from './browser.ts';

const A = 'sess_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'sess_bbbbbbbbbbbbbbbbbbbbbbbb';

let browser: Browser;
let dir: string;
let server: ConsoleServer;
let page: Page;
const agents: McpHandle[] = [];

beforeAll(async () => void (browser = await launch()), LAUNCH_HOOK_TIMEOUT_MS);
afterAll(async () => {
  await browser?.close();
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-compose-'));
  server = await startConsole({ project: dir, port: 0, log: () => {} });
  page = await browser.page();
  await page.goto(server.url);
  await page.locator('#live', { hasText: 'live' }).waitFor();
});
afterEach(async () => {
  await page.close();
  for (const a of agents.splice(0)) await a.close();
  await server.close();
  await rm(dir, { recursive: true, force: true });
  expect(browser.errors).toEqual([]);
});

const ok = async (p: Promise<{ ok: boolean; message: string; data?: any }>) => {
  const r = await p;
  if (!r.ok) throw new Error(r.message);
  return r;
};

describe('the compose box', () => {
  it('sends as Operator to one agent; the draft and its caret survive a live update; a refusal is shown', async () => {
    const [a, b] = await Promise.all([startMcp(dir, { pin: A }), startMcp(dir, { pin: B })]);
    agents.push(a, b);
    await ok(a.call('opencomms_create', { channel: 'team', role: 'Builder', role_prompt: 'Build.' }));
    await ok(b.call('opencomms_join', { channel: 'team', role: 'Reviewer', role_prompt: 'Review.' }));
    await page.locator('button.card[data-channel="team"]').click();
    await page.locator('#compose-to option[value="Reviewer"]').waitFor({ state: 'attached' });

    await page.locator('#compose-text').click();
    await page.keyboard.type('Please look at the parser');
    // Another process changes the channel while the operator types: the page re-renders by SSE.
    await ok(a.call('opencomms_send', { channel: 'team', content: 'from the builder', to: 'Reviewer' }));
    await page.locator('tr[data-envelope][data-status="pending"]').waitFor();
    await page.keyboard.type(' first.');
    await expect(page.locator('#compose-text').inputValue()).resolves.toBe('Please look at the parser first.');

    await page.selectOption('#compose-to', 'Reviewer');
    await page.locator('#compose-send').click();
    await page.locator('.toast.ok', { hasText: 'Queued 1 envelope for Reviewer' }).waitFor();
    await expect(page.locator('#compose-text').inputValue()).resolves.toBe('');
    const pulled = await ok(b.call('opencomms_pull', {}));
    const framed = (pulled.data.messages as Array<{ framed: string }>).map((m) => m.framed);
    expect(framed.at(-1)).toMatch(/^\[OpenComms\] from Operator \| type: manual \| id: ocm_/);
    expect(framed.at(-1)).toContain('<<<UNTRUSTED_PEER_MESSAGE>>>\nPlease look at the parser first.\n');

    // Empty: refused with the reason's message, nothing sent.
    await page.locator('#compose-send').click();
    await page.locator('.toast.error', { hasText: 'content is blank' }).waitFor();
  });
});
