// The console in real Chromium (FEATURES.md §10.3, CON-1, CON-2, CON-3, CON-7): every change the
// page shows arrives by SSE (never a reload), whether the page, the CLI or an agent's MCP server
// made it. Screenshots of the main views go to docs/screenshots/ (the README and docs/operator.md show them).
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startConsole, type ConsoleServer } from '../../src/console/server.ts';
import type { Caller } from '../../src/engine/index.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { startMcp, type McpHandle } from '../helpers/mcp-client.ts';
import { BIN, start, type Proc } from '../helpers/process.ts';
import { LAUNCH_HOOK_TIMEOUT_MS, launch, type Browser } from './browser.ts';

const SHOTS = join(import.meta.dirname, '..', '..', 'docs', 'screenshots');
const worker = join(import.meta.dirname, '..', 'helpers', 'runtime-worker.ts');
const A = 'sess_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'sess_bbbbbbbbbbbbbbbbbbbbbbbb';

let browser: Browser;
let dir: string;
let server: ConsoleServer;
let page: Page;
const closers: Array<() => Promise<unknown>> = [];

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
  // Set once; a reload would clear it.
  await page.evaluate(() => ((window as unknown as { loadedOnce: boolean }).loadedOnce = true));
});
afterEach(async () => {
  expect(await page.evaluate(() => (window as unknown as { loadedOnce?: boolean }).loadedOnce)).toBe(true);
  await page.close();
  for (const c of closers.splice(0).reverse()) await c();
  await server.close();
  await rm(dir, { recursive: true, force: true });
  // Nothing but the console itself was ever asked for (no CDN, no external request).
  expect(browser.requests.filter((u) => !u.startsWith('http://127.0.0.1:') && !u.startsWith('data:'))).toEqual([]);
  expect(browser.errors).toEqual([]);
});

const card = (name: string) => page.locator(`button.card[data-channel="${name}"]`);
const row = (status: string) => page.locator(`tr[data-envelope][data-status="${status}"]`);
async function mcp(pin: string): Promise<McpHandle> {
  const h = await startMcp(dir, { pin, host: 'claude-code' });
  closers.push(() => h.close());
  return h;
}
const ok = async (p: Promise<{ ok: boolean; message: string; data?: any }>) => {
  const r = await p;
  if (!r.ok) throw new Error(r.message);
  return r;
};

describe('CON-1 create a channel', () => {
  it('the form creates an empty active card with a join command per host; a CLI-made channel appears too', async () => {
    await page.fill('#create-name', 'review');
    await page.fill('#create-max', '3');
    await page.press('#create-name', 'Enter'); // the keyboard submits the form
    await card('review').waitFor();
    await expect(card('review').innerText()).resolves.toMatch(/review\s+active\s+0\/3 agents\s+No description yet/);
    await page.locator('.detail-head h2', { hasText: 'review' }).waitFor();
    await expect(page.locator('#join-code').innerText()).resolves.toBe(
      '/OpenComms Join Channel=review As=<role> [role instructions]',
    );
    // Keyboard: Tab to the Codex tab. Meanwhile another process (the CLI) creates a channel: the page
    // learns of it by SSE and re-renders, and the focus stays on the tab, so Enter still chooses it.
    await page.locator('.tab[data-host="codex"]').focus();
    await promisify(execFile)(process.execPath, [BIN, 'channel', 'create', 'from-cli', '--project', dir]);
    await card('from-cli').waitFor({ timeout: 5000 });
    await expect(page.evaluate(() => document.activeElement?.getAttribute('data-host'))).resolves.toBe('codex');
    await page.keyboard.press('Enter');
    await page.locator('#join-code', { hasText: 'spawn_push=true' }).waitFor();
    await expect(page.locator('#join-code').innerText()).resolves.toBe(
      'opencomms_join(channel="review", role="<role>", role_prompt="...", spawn_push=true)',
    );
    await page.screenshot({ path: join(SHOTS, 'channels.png') });
  });
});

describe('CON-7 an agent process sends; the machine view follows live', () => {
  it('pending → delivered (pull) and pending → in_flight → delivered (push, across a crash), without a reload', async () => {
    await page.fill('#create-name', 'team');
    await page.press('#create-name', 'Enter');
    await card('team').waitFor();
    // Agents join the console-made channel from the join command (CON-6: the first joiner sets its identity).
    const a = await mcp(A);
    const b = await mcp(B);
    await ok(a.call('opencomms_join', { channel: 'team', role: 'Builder', role_prompt: 'Build.' }));
    await ok(b.call('opencomms_join', { channel: 'team', role: 'Reviewer', role_prompt: 'Review.' }));
    await page.locator('table.agents td', { hasText: 'Reviewer' }).waitFor();

    const sent = await ok(
      a.call('opencomms_send', {
        channel: 'team',
        content: 'Please review the parser.',
        to: 'Reviewer',
        session_description: 'Parser review',
      }),
    );
    const id = sent.data.message_ids[0] as string;
    const mine = page.locator(`tr[data-envelope="${id}"]`);
    await mine.and(row('pending')).waitFor({ timeout: 3000 });
    await expect(mine.locator('td').nth(7).innerText()).resolves.toBe('awaiting_pull');
    await mine.focus();
    await page.keyboard.press('Enter');
    await page.locator('[data-machine="envelope"] [data-state="pending"].current').waitFor();
    await page.locator('tr[data-recipient]', { hasText: 'Reviewer' }).click();
    await page.locator('[data-machine="recipient"] [data-state="blocked"].current').waitFor();

    await ok(b.call('opencomms_pull', {}));
    await mine.and(row('delivered')).waitFor({ timeout: 3000 });
    await page.locator('[data-machine="envelope"] [data-state="delivered"].current').waitFor();
    await page.locator('[data-machine="envelope"] .edge.taken[data-from="pending"][data-to="delivered"]').waitFor();
    await expect(page.locator('ol.trail').innerText()).resolves.toMatch(/SEND → pending[\s\S]*PULL → delivered/);
    await expect(page.locator('.desc').innerText()).resolves.toBe('Parser review');

    // A push member whose owner process hangs in the prompt: its envelope stays in_flight.
    const rt = openRuntime(dir);
    const pusher: Caller = {
      session_id: 'sess_push',
      host: 'opencode',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: 'sess_push',
      project_id: 'local-project',
      worktree: dir,
    };
    await ok(rt.run({ op: 'join', caller: pusher, args: { channel: 'team', role: 'Pusher', role_prompt: 'p' } }));
    await rt.close();
    const owners: Proc[] = [];
    closers.push(async () => Promise.all(owners.map((o) => o.stop('SIGKILL'))));
    const hung = start(['--import', 'tsx', worker, 'owner', dir, 'sess_push', 'hang']);
    owners.push(hung);
    await hung.waitFor((l) => l === 'ready');
    const push = await ok(a.call('opencomms_send', { channel: 'team', content: 'Build it.', to: 'Pusher' }));
    const pid = push.data.message_ids[0] as string;
    const pushed = page.locator(`tr[data-envelope="${pid}"]`);
    await pushed.and(row('in_flight')).waitFor({ timeout: 5000 });
    await pushed.click();
    await page.locator('tr[data-recipient]', { hasText: 'Pusher' }).click();
    await page.locator('[data-machine="envelope"] [data-state="in_flight"].current').waitFor();
    await page.locator('[data-machine="recipient"] [data-state="delivering"].current').waitFor();
    await page.screenshot({ path: join(SHOTS, 'delivery-view.png'), fullPage: true });
    // The owner dies between drain and commit; the next owner sweeps and delivers (at-least-once).
    await hung.stop('SIGKILL');
    const next = start(['--import', 'tsx', worker, 'owner', dir, 'sess_push']);
    owners.push(next);
    // The page's deadline covers the sweep, the delivery and the SSE refresh, not the start of a
    // process: on a machine's first run (cold module and transform caches, a CPU busy with the
    // install) a start alone takes seconds, so it is waited for on its own, with the helper's limit.
    await next.waitFor((l) => l === 'ready');
    await next.waitFor((l) => l.includes(pid));
    await pushed.and(row('delivered')).waitFor({ timeout: 10_000 });
    await expect(page.locator('ol.trail').innerText()).resolves.toMatch(
      /DRAIN → in_flight[\s\S]*SWEEP → pending[\s\S]*DRAIN → in_flight[\s\S]*COMMIT → delivered/,
    );
  });
});

describe('CON-2 remove a member', () => {
  it('Remove severs that link only; the others are notified; agent states carry their definition', async () => {
    const rt = openRuntime(dir);
    const agent = (sid: string): Caller => ({
      session_id: sid,
      host: 'codex',
      surface: 'mcp',
      delivery_mode: 'pull',
      host_session_id: null,
      project_id: 'local-project',
      worktree: dir,
    });
    await ok(rt.run({ op: 'create', caller: agent(A), args: { channel: 'crew', role: 'Lead', role_prompt: 'l' } }));
    await ok(rt.run({ op: 'join', caller: agent(B), args: { channel: 'crew', role: 'Reviewer', role_prompt: 'r' } }));
    await ok(
      rt.run({ op: 'join', caller: agent('sess_gone'), args: { channel: 'crew', role: 'Tester', role_prompt: 't' } }),
    );
    await ok(rt.run({ op: 'mark_stale', session: 'sess_gone' }));
    await card('crew').click();
    const states = page.locator('table.agents .agent');
    await states.nth(2).waitFor();
    await expect(states.allInnerTexts()).resolves.toEqual(['Idle', 'Idle', 'Offline']);
    // The file store keeps no leases: each agent is on this machine, with no lease to judge.
    await expect(page.locator('table.agents .lease').allInnerTexts()).resolves.toEqual([
      'lease n/a',
      'lease n/a',
      'lease n/a',
    ]);
    await expect(page.locator('table.agents td', { hasText: 'this computer' }).count()).resolves.toBe(3);
    await expect(states.first().getAttribute('title')).resolves.toMatch(/^Offline: .*Working: .*Idle: /);
    await page.screenshot({ path: join(SHOTS, 'channel-detail.png') });

    await page.getByRole('button', { name: 'Remove Reviewer' }).click();
    await page.locator('table.agents td', { hasText: 'Reviewer' }).waitFor({ state: 'detached' });
    // The toast follows the POST's answer, which can come after the SSE refresh that re-rendered
    // the roster: it is waited for, not read at once.
    await page.locator('#toast', { hasText: 'Removed Reviewer' }).waitFor();
    await expect(page.locator('#toast').innerText()).resolves.toBe(
      'Removed Reviewer (sess_bbbbbbbbbbbbbbbbbbbbbbbb) from "crew".',
    );
    // The remaining members each have the operator's notice waiting: the live one shows as
    // Working, the stale one stays Offline.
    await page.locator('table.agents .agent', { hasText: 'Working' }).waitFor();
    await expect(states.allInnerTexts()).resolves.toEqual(['Working', 'Offline']);
    const notices = Object.values((await rt.read()).messages).filter((e) => e.message_type === 'system');
    expect(notices.map((e) => e.recipient_role).sort()).toEqual(['Lead', 'Tester']);
    await rt.close();
  });
});

describe('CON-3 save → restore as new → delete', () => {
  it('runs the whole lifecycle from the page, with a structured summary and a confirm dialog', async () => {
    await page.fill('#create-name', 'sprint');
    await page.press('#create-name', 'Enter');
    await card('sprint').waitFor();
    // The operator holds delivery and releases it; the badge follows.
    await page.getByRole('button', { name: 'Pause delivery' }).click();
    await page.locator('.detail-head .badge', { hasText: 'paused' }).waitFor();
    await expect(page.locator('#toast').innerText()).resolves.toBe('Paused "sprint": delivery is held.');
    await page.getByRole('button', { name: 'Resume delivery' }).click();
    await page.locator('.detail-head .badge', { hasText: 'paused' }).waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Save channel…' }).click();
    await expect(page.locator('#save-summary').inputValue()).resolves.toBe(
      'Goal: \nDone: \nOpen questions: \nNext steps: ',
    );
    await page.fill('#save-summary', 'Goal: ship the parser\nDone: review\nOpen questions: none\nNext steps: release');
    await page.screenshot({ path: join(SHOTS, 'save-dialog.png') });
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.locator('#saved-list button.card[data-channel="sprint"]').waitFor();
    await expect(page.locator('#live-list').innerText()).resolves.toBe('No live channels.');
    await page.locator('pre.summary', { hasText: 'Goal: ship the parser' }).waitFor();

    await page.getByRole('button', { name: 'Restore as new…' }).click();
    await page.fill('#restore-name', 'sprint-2');
    await page.press('#restore-name', 'Enter');
    await page.locator('#live-list button.card[data-channel="sprint-2"]').waitFor();
    await page.locator('.detail-head h2', { hasText: 'sprint-2' }).waitFor();
    await page.locator('details.panel summary', { hasText: 'Restored from a saved channel' }).waitFor();

    // Delete asks first; Cancel (the default button) keeps the channel.
    await page.getByRole('button', { name: 'Delete…' }).click();
    await expect(page.locator('#delete-text').innerText()).resolves.toContain(
      '"sprint-2" and its pending mail are deleted for good',
    );
    await page.keyboard.press('Escape');
    await expect(card('sprint-2').count()).resolves.toBe(1);
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.locator('#delete-dialog').getByRole('button', { name: 'Delete' }).click();
    await card('sprint-2').waitFor({ state: 'detached' });
    // The archive too.
    await card('sprint').click();
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.locator('#delete-dialog').getByRole('button', { name: 'Delete' }).click();
    await card('sprint').waitFor({ state: 'detached' });
    await expect(page.locator('#saved-list').innerText()).resolves.toBe('No saved channels.');
  });
});

describe('layout', () => {
  it('is readable at 1280×800 and on a narrow window (no sideways scrolling of the page)', async () => {
    const rt = openRuntime(dir);
    await ok(
      rt.run({
        op: 'create',
        caller: {
          session_id: A,
          host: 'claude-code',
          surface: 'mcp',
          delivery_mode: 'pull',
          host_session_id: null,
          project_id: 'local-project',
          worktree: dir,
        },
        args: { channel: 'wide-and-narrow', role: 'Lead', role_prompt: 'l' },
      }),
    );
    await rt.close();
    await card('wide-and-narrow').click();
    await page.locator('[data-machine="envelope"] svg').waitFor();
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 400, height: 860 });
    expect(await overflow()).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(SHOTS, 'narrow.png') });
  });
});
