// The README and docs/ say what the code does, where a machine can tell: every command of the
// README's table is one the CLI registers (with the options it shows), every `NAME` = value a page
// quotes is that constant's value, every relative link and anchor resolves, and docs/protocol.md
// lists every tool and every refusal reason the code has.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { TOOLS } from '../adapters/tools.ts';
import { buildProgram } from '../src/cli/main.ts';
import * as consoleEvents from '../src/console/events.ts';
import * as consoleLimits from '../src/console/limits.ts';
import * as protocolLimits from '../src/protocol/limits.ts';
import { REASONS } from '../src/protocol/result.ts';
import * as runtimeLimits from '../src/runtime/limits.ts';
import * as storeWatch from '../src/store/file/subscribe.ts';

const root = join(import.meta.dirname, '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');
const PAGES = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Text outside fenced code blocks (a diagram or a shell sample is not prose). */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, '');

describe("the README's command table", () => {
  const program = buildProgram({ io: { out: () => {}, err: () => {} }, exit: () => {} });
  const table = /<!-- usage:begin -->([\s\S]*?)<!-- usage:end -->/.exec(read('README.md'))?.[1] ?? '';
  /** Each backticked command line of the table's first column, without `opencomms`. */
  const lines = table
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .flatMap((row) =>
      [...row.split(' | ')[0]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/^opencomms /, '')),
    );
  /** The registered commands as `help` lists them (the help command included). */
  const listed = program.createHelp().visibleCommands(program);
  const named = (cmds: readonly Command[], name: string) =>
    cmds.find((c) => c.name() === name || c.aliases().includes(name));
  const longs = (c: Command) => c.options.map((o) => o.long);

  it('has rows', () => expect(lines.length).toBeGreaterThan(10));

  it.each(lines)('`%s` is a registered command with those options', (line) => {
    const words = line.split(/\s+/);
    const cmd = named(listed, words[0]!);
    expect(cmd, `no command ${words[0]}`).toBeDefined();
    const targets = [cmd!];
    const next = words[1];
    if (cmd!.commands.length > 0 && next && /^[a-z|]+$/.test(next)) {
      targets.splice(0, 1);
      for (const sub of next.split('|')) {
        const found = named(cmd!.commands, sub);
        expect(found, `no subcommand ${words[0]} ${sub}`).toBeDefined();
        targets.push(found!);
      }
    }
    for (const flag of line.match(/--[a-z][a-z-]*/g) ?? [])
      for (const t of targets) expect([...longs(t), ...longs(program)], `${t.name()} has no ${flag}`).toContain(flag);
  });

  it('lists every registered command', () => {
    const first = new Set(lines.map((l) => l.split(/\s+/)[0]));
    for (const c of listed) expect(first.has(c.name()) || c.aliases().some((a) => first.has(a)), c.name()).toBe(true);
  });
});

describe('numbers the docs quote from a named constant', () => {
  const CONSTANTS: Record<string, unknown> = {
    ...protocolLimits,
    ...runtimeLimits,
    ...storeWatch,
    ...consoleLimits,
    ...consoleEvents,
  };
  const quotes = PAGES.flatMap((page) =>
    [...prose(read(page)).matchAll(/`([A-Z][A-Z0-9_]+)`\s*=\s*([0-9][0-9,_]*(?:\.[0-9]+)?)/g)].map((m) => ({
      page,
      name: m[1]!,
      text: m[2]!,
    })),
  );

  it('are quoted in the recognisable form `NAME` = value', () => {
    expect(quotes.length).toBeGreaterThan(30);
    const names = new Set(quotes.map((q) => q.name));
    for (const n of ['MAX_PERSISTED_MESSAGES', 'MAX_PROCESSED_CORRELATIONS', 'RESCAN_INTERVAL_MS', 'LOCK_STALE_MS'])
      expect(names).toContain(n);
  });

  it.each(quotes.map((q) => [q.page, q.name, q.text] as const))('%s: `%s` = %s', (_page, name, text) => {
    expect(Object.keys(CONSTANTS), `${name} is not a constant of the limit modules`).toContain(name);
    expect(Number(text.replace(/[,_]/g, ''))).toBe(CONSTANTS[name]);
  });
});

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
const anchors = (file: string) =>
  new Set([...prose(readFileSync(file, 'utf8')).matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));

describe('relative links in the README and docs/', () => {
  const links = PAGES.flatMap((page) =>
    [...prose(read(page)).matchAll(/\]\(([^)\s]+)\)/g)]
      .map((m) => m[1]!)
      .filter((t) => !/^[a-z]+:/.test(t))
      .map((target) => ({ page, target })),
  );

  it('exist', () => expect(links.length).toBeGreaterThan(20));

  it.each(links.map((l) => [l.page, l.target] as const))('%s → %s', (page, target) => {
    const [path, anchor] = target.split('#') as [string, string | undefined];
    const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), path);
    expect(existsSync(file), `${relative(root, file)} does not exist`).toBe(true);
    if (anchor !== undefined)
      expect([...anchors(file)], `no heading #${anchor} in ${relative(root, file)}`).toContain(anchor);
  });
});

describe('docs/protocol.md', () => {
  const doc = read('docs/protocol.md');
  const section = (title: string) => {
    const start = doc.indexOf(`\n### ${title}\n`);
    expect(start, `no section ${title}`).toBeGreaterThan(0);
    const end = doc.indexOf('\n## ', start + 1);
    return doc.slice(start, end < 0 ? undefined : end);
  };

  it('explains every refusal reason the code has, and no other', () => {
    const listed = [...section('Refusal reasons').matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    expect([...listed].sort()).toEqual([...REASONS].sort());
  });

  it('lists every tool', () => {
    const listed = section('Result shape');
    for (const t of TOOLS) expect(listed).toContain(`\`${t.name}\``);
  });
});
