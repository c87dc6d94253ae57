// Debian's Chromium under playwright-core, launched as the team guide says: headless, no sandbox
// (root in CI), no GPU, no background traffic, a fresh profile per run. Every request the page
// makes is recorded, so a test can prove nothing left the machine.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.OPENCOMMS_CHROMIUM ?? '/usr/bin/chromium';
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

export interface Browser {
  context: BrowserContext;
  /** Every URL a page of this browser requested. */
  requests: string[];
  /** Uncaught errors of its pages' scripts. */
  errors: string[];
  page(viewport?: { width: number; height: number }): Promise<Page>;
  close(): Promise<void>;
}

export async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install it with \`apt-get install -y chromium\` (see README, "Console").`);
  const profile = await mkdtemp(join(tmpdir(), 'oc-chromium-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 800 } });
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
