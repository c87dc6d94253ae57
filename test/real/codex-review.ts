// Codex's review of a project's hooks, answered the way a user does: "Trust all and continue".
// Codex shows a dialog at start (it can pop up after the composer), and a key pressed as it appears
// can be lost; choosing "Review hooks" by mistake opens the hooks table instead. So the screen is
// read before each key, and the loop ends only when Codex has written the trust to config.toml and
// nothing of the review is left on screen.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Terminal } from './tmux.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Any screen of the review: the start dialog, the hooks table, or one hook's page. */
const REVIEWING = /hooks need review|esc back|esc close/i;

export async function trustCodexHooks(term: Terminal, codexHome: string): Promise<void> {
  const cfg = join(codexHome, 'config.toml');
  await term.waitScreen(/hooks need review/i, 40_000);
  const end = Date.now() + 30_000;
  while (!/trusted_hash/.test(readFileSync(cfg, 'utf8')) || REVIEWING.test(term.screen())) {
    if (Date.now() > end) throw new Error(`the hooks were not trusted; screen:\n${term.screen()}`);
    const screen = term.screen();
    if (/›\s*2\. Trust all and continue/.test(screen)) term.keys('Enter');
    else if (/2\. Trust all and continue/.test(screen)) term.keys('2');
    else if (/t trust all/.test(screen)) term.keys('t');
    else if (/esc back|esc close/.test(screen)) term.keys('Escape');
    await sleep(400);
  }
  await term.waitScreen(/Ask Codex/, 20_000);
}
