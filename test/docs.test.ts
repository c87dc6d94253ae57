// The README and docs/ say what the code does, where a machine can tell: every command of the
// README's table, and every `opencomms <command> [--option]` any page quotes, is one the CLI
// registers with those options; `--project`'s default is the one `opencomms --help` gives; every
// `NAME` = value (or `NAME` (value)) a page quotes is that constant's value; every relative link,
// repository path and anchor resolves, and every `page.md "Heading"` names a heading there; no page
// cites a file, spec section or test id the repository lacks unless it says the text is outside it;
// figures given with their `wc` command match the file; npm test's time is the same on both pages
// that give it; no page narrates how something came to be ("Before, …", "was ≤ 2×", "fell from");
// and docs/protocol.md lists every tool and every refusal reason the code has.
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
    .flatMap((row) => [...row.split(' | ')[0]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/^opencomms /, '')));
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

/** Every `opencomms …` command line the README and docs/ quote: in a code span of the prose or on a
 *  line of a fenced block (a `#` comment cut off). */
const commandLines = (text: string) => {
  const spans = [...prose(text).matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
  const fenced = [...text.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].flatMap((m) =>
    m[1]!.split('\n').map((l) => l.replace(/\s#.*$/, '')),
  );
  return [...spans, ...fenced].flatMap((s) =>
    [...s.matchAll(/(?:^|[\s($])(?:npx )?opencomms ([a-z][^;&]*?)(?=\s*(?:&&|;|$))/g)].map((m) => m[1]!.trim()),
  );
};

describe('every `opencomms <command> [--option]` the README and docs/ quote', () => {
  const program = buildProgram({ io: { out: () => {}, err: () => {} }, exit: () => {} });
  const listed = program.createHelp().visibleCommands(program);
  const named = (cmds: readonly Command[], name: string) =>
    cmds.find((c) => c.name() === name || c.aliases().includes(name));
  const longs = (c: Command) => c.options.map((o) => o.long);
  const quoted = PAGES.flatMap((page) => commandLines(read(page)).map((line) => ({ page, line })));

  it('are many', () => expect(quoted.length).toBeGreaterThan(80));

  it.each(quoted.map((q) => [q.page, q.line] as const))('%s: `opencomms %s`', (_page, line) => {
    const words = line.split(/\s+/);
    const name = /^[a-z][a-z-]*/.exec(words[0]!)![0];
    const cmd = named(listed, name);
    expect(cmd, `no command ${name}`).toBeDefined();
    const targets = [cmd!];
    const next = words[1];
    if (cmd!.commands.length > 0 && next && /^[a-z|]+$/.test(next)) {
      targets.splice(0, 1);
      for (const sub of next.split('|')) {
        const found = named(cmd!.commands, sub);
        expect(found, `no subcommand ${name} ${sub}`).toBeDefined();
        targets.push(found!);
      }
    }
    // `opencomms codex` hands every other argument to Codex.
    if ((cmd as unknown as { _allowUnknownOption: boolean })._allowUnknownOption) return;
    for (const flag of line.match(/(?<![\w-])--[a-z][a-z-]*/g) ?? [])
      for (const t of targets)
        expect([...longs(t), ...longs(program), '--help'], `${t.name()} has no ${flag}`).toContain(flag);
  });

  it("state --project's default as `opencomms --help` does: the nearest directory holding .opencomms or .git", () => {
    const option = program.options.find((o) => o.long === '--project')!;
    expect(option.description).toContain(
      'default: the nearest directory at or above the current one holding .opencomms or .git',
    );
    for (const page of ['README.md', 'docs/protocol.md'])
      expect(read(page).replace(/\s+/g, ' ')).toContain(
        'the nearest directory at or above the current one holding `.opencomms/` or `.git/`',
      );
  });
});

describe('constants the docs quote as `NAME` (value) or `NAME` (value ms)', () => {
  const CONSTANTS: Record<string, unknown> = {
    ...protocolLimits,
    ...runtimeLimits,
    ...storeWatch,
    ...consoleLimits,
    ...consoleEvents,
  };
  const quotes = PAGES.flatMap((page) =>
    [...prose(read(page)).matchAll(/`([A-Z][A-Z0-9_]+)` \(([0-9][0-9,_]*(?:\.[0-9]+)?)(?: ms)?\)/g)]
      .filter((m) => m[1]! in CONSTANTS)
      .map((m) => [page, m[1]!, m[2]!] as const),
  );

  it('are found', () => expect(quotes.length).toBeGreaterThan(2));

  it.each(quotes)('%s: `%s` (%s)', (_page, name, text) => {
    expect(Number(text.replace(/[,_]/g, ''))).toBe(CONSTANTS[name]);
  });
});

describe('files, sections and ids the docs cite', () => {
  /** Repository paths in the text (placeholders, globs and installed packages aside). */
  const DIRS = ['test', 'docs', 'src', 'adapters', 'scripts', 'bench', 'machines', 'visualizations'];
  const paths = PAGES.flatMap((page) =>
    [...read(page).matchAll(new RegExp(`(?<![\\w./$~-])((?:${DIRS.join('|')})/[\\w./@-]*\\w)(#[\\w-]+)?`, 'g'))]
      .filter((m) => !/[<*{]|node_modules/.test(m[1]!))
      .map((m) => [page, m[1]!, m[2]?.slice(1) ?? ''] as const),
  );

  it('cite many paths', () => expect(paths.filter(([, p]) => p.startsWith('test/')).length).toBeGreaterThan(100));

  it.each(paths)('%s: %s exists (#%s)', (_page, path, anchor) => {
    expect(existsSync(join(root, path)), `${path} is not in the repository`).toBe(true);
    if (anchor) expect([...anchors(join(root, path))], `no heading #${anchor} in ${path}`).toContain(anchor);
  });

  /** A page may name a text outside the repository only in a paragraph that says so. */
  const OUTSIDE = /not (?:part of|in) this repository/;
  const paragraphs = PAGES.flatMap((page) =>
    prose(read(page))
      .split(/\n\s*\n/)
      .map((text) => ({ page, text })),
  );
  /** Files of the hosts' own that the docs name (their project files), not citations. */
  const HOST_FILES = ['CLAUDE.md', 'AGENTS.md'];

  it('name no Markdown file outside the repository, and no section of one (§), unless the paragraph says it is outside', () => {
    const wrong: string[] = [];
    for (const { page, text } of paragraphs) {
      if (OUTSIDE.test(text.replace(/\s+/g, ' '))) continue;
      for (const m of text.matchAll(/\b[A-Z][A-Z0-9_-]*\.md\b/g))
        if (!HOST_FILES.includes(m[0]) && !existsSync(join(root, m[0])) && !existsSync(join(root, 'docs', m[0])))
          wrong.push(`${page}: ${m[0]}`);
      for (const m of text.matchAll(/§\s*[0-9][0-9.]*/g)) if (!/"[^"\n]*§/.test(text)) wrong.push(`${page}: ${m[0]}`);
    }
    expect(wrong).toEqual([]);
  });

  it("cite only test ids (DLV-5, MCP-1, …) that the repository's tests carry", () => {
    const tests = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory()
          ? e.name === 'node_modules'
            ? []
            : tests(`${dir}/${e.name}`)
          : e.name.endsWith('.ts')
            ? [read(`${dir}/${e.name}`)]
            : [],
      );
    const carried = tests('test').join('\n');
    const ids = new Set(
      PAGES.flatMap((page) => [...prose(read(page)).matchAll(/\b[A-Z]{2,5}-[0-9]+\b/g)].map((m) => m[0])),
    );
    for (const unit of ['UTF-8', 'UTF-16', 'SHA-256']) ids.delete(unit);
    expect(ids.size).toBeGreaterThan(10);
    expect([...ids].filter((id) => !new RegExp(`\\b${id}\\b`).test(carried))).toEqual([]);
  });

  it('name sections that exist: `page.md "Heading"`', () => {
    const refs = PAGES.flatMap((page) =>
      [...prose(read(page)).matchAll(/\b([a-z][\w-]*\.md)(?:\]\([^)]*\))?,? "([^"]+)"/g)].map((m) => ({
        page,
        file: m[1]!,
        heading: m[2]!,
      })),
    );
    expect(refs.length).toBeGreaterThan(3);
    const headings = (file: string) => [...prose(read(file)).matchAll(/^#{1,6} (.+)$/gm)].map((m) => m[1]!.trim());
    for (const r of refs) {
      const file = existsSync(join(root, 'docs', r.file)) ? `docs/${r.file}` : r.file;
      expect(headings(file), `${r.page}: ${r.file} "${r.heading}"`).toContain(r.heading);
    }
  });
});

describe('pages state what is true, not how it came to be', () => {
  const NARRATION = [
    /\bBefore, /,
    /\bwas [≤≥<>]/,
    /\(was /,
    /\bfell from\b/,
    /\bwent from\b/,
    /\bnow fixed\b/,
    /\bthe run before\b/,
    /\bone before it\b/,
    /\bas before\b/,
    /\bpreviously\b/i,
    /\bformerly\b/i,
    /\bused to (?:be|take|read|write|say|print)\b/,
  ];
  it.each(PAGES)('%s', (page) => {
    const lines = prose(read(page)).replace(/\n(?!\n)/g, ' ');
    expect(NARRATION.flatMap((re) => lines.match(new RegExp(`.{0,40}${re.source}.{0,40}`, re.flags)) ?? [])).toEqual(
      [],
    );
  });
});

describe('figures the docs give with the command that shows them', () => {
  /** `N KB … (`wc -c FILE`)` and `About N lines (`wc -l FILE`)`. */
  const figures = PAGES.flatMap((page) =>
    [...prose(read(page)).matchAll(/([0-9][0-9,]*) (KB|lines)[^`(]{0,20}\s\(`wc -([cl]) ([^`]+)`\)/g)].map(
      (m) => [page, Number(m[1]!.replace(/,/g, '')), m[2]!, m[4]!] as const,
    ),
  );

  it('are found', () => expect(figures.length).toBeGreaterThanOrEqual(2));

  it.each(figures)('%s: %s %s of %s', (_page, n, unit, file) => {
    const path = join(root, file);
    if (!existsSync(path) && file.startsWith('dist/')) return; // `npm run build` makes it (npm test builds first)
    const text = readFileSync(path);
    if (unit === 'KB') expect(Math.round(text.length / 1024)).toBe(n);
    else expect(Math.abs(text.toString('utf8').split('\n').length - 1 - n), 'within 10 lines').toBeLessThanOrEqual(10);
  });

  it('npm test takes the same time in the README and docs/architecture.md', () => {
    const said = (page: string) => /npm test[^\n]*?\(about ([0-9]+|a) minutes? on 2 cores/.exec(read(page))?.[1];
    expect(said('README.md')).toBeDefined();
    expect(said('docs/architecture.md')).toBe(said('README.md'));
  });
});
