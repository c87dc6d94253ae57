// Debian's Chromium under playwright-core, launched as the team guide says: headless, no sandbox
// (root in CI), no GPU, no background traffic, a fresh profile per run. Every request the page
// makes is recorded, so a test can prove nothing left the machine.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.OPENCOMMS_CHROMIUM ?? '/usr/bin/chromium';
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export interface Browser {
  context: BrowserContext;
  /** Every URL a page of this browser requested. */
  requests: string[];
  /** Uncaught errors of its pages' scripts. */
  errors: string[];
  page(viewport?: { width: number; height: number }): Promise<Page>;
  close(): Promise<void>;
}

/** A start here takes 0.4–0.7 s; twice in fresh-clone CI runs one never finished within the
 *  30 s hook (nothing of ours had run yet). One that has not answered in this long is killed and
 *  tried again on a fresh profile, said on stderr, up to LAUNCH_ATTEMPTS times. */
const LAUNCH_TIMEOUT_MS = 20_000;
const LAUNCH_ATTEMPTS = 3;
/** The `beforeAll` hook that launches must wait for every attempt. */
export const LAUNCH_HOOK_TIMEOUT_MS = LAUNCH_TIMEOUT_MS * LAUNCH_ATTEMPTS + 5_000;

async function start(): Promise<{ context: BrowserContext; profile: string }> {
  for (let attempt = 1; ; attempt++) {
    const profile = await mkdtemp(join(tmpdir(), 'oc-chromium-'));
    try {
      const context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: FLAGS,
        viewport: { width: 1280, height: 800 },
        timeout: LAUNCH_TIMEOUT_MS,
      });
      return { context, profile };
    } catch (e) {
      await rm(profile, { recursive: true, force: true });
      if (attempt >= LAUNCH_ATTEMPTS) throw e;
      process.stderr.write(
        `[browser] launch attempt ${attempt} failed, trying again: ${(e as Error).message.split('\n')[0]}\n`,
      );
    }
  }
}

export async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `${CHROMIUM} is missing: install it with \`apt-get install -y chromium\` (see docs/operator.md, "How it is tested").`,
    );
  const { context, profile } = await start();
  const requests: string[] = [];
  const errors: string[] = [];
  context.on('request', (r) => requests.push(r.url()));
  return {
    context,
    requests,
    errors,
    async page(viewport) {
      const p = await context.newPage();
      if (viewport) await p.setViewportSize(viewport);
      p.on('pageerror', (e) => errors.push(e.message));
      return p;
    },
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
