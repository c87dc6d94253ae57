// Which environment each real host gives a project's stdio MCP server (docs/postgres.md, "Install
// the hosts"): the installers decide by it whether a config names the password's variables. A probe
// server writes its own environment to a file, then runs the toy server.
// - Claude Code 2.1.332: the session's whole environment, with the `.mcp.json` entry's `env` over it;
//   `${VAR:-}` there is an empty value when the session has no VAR (so an entry that names a
//   variable can only add an empty one).
// - Codex 0.171.0: a few variables of its own (HOME, PATH, …) and, of the session's, only those its
//   `env_vars` lists, each one the session sets (an empty one too); an unset one stays unset.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import {
  TOY_SERVER,
  bin,
  claudeArgs,
  codexArgs,
  configureClaude,
  configureCodex,
  describeRun,
  run,
  trustCodexProject,
} from './env.ts';
import { startFakeAnthropic, startFakeResponses } from './fake/index.ts';

const { defer, sandbox } = useCleanups();

/** The probe's environment, the variables this test sets only. */
const seen = (file: string): Record<string, string> | null =>
  existsSync(file)
    ? Object.fromEntries(
        readFileSync(file, 'utf8')
          .split('\0')
          .filter((l) => /^(PG|PROBE_)/.test(l))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      )
    : null;

const probeArgs = (log: string) => [
  '-c',
  `cat /proc/$$/environ > '${log}'; exec '${process.execPath}' '${TOY_SERVER}'`,
];

describe("a project MCP server's environment", () => {
  it("Claude Code: the session's whole environment; `${VAR:-}` adds an empty VAR when the session has none", async () => {
    const sb = sandbox('mcp-env-claude');
    const fake = defer(await startFakeAnthropic({ '[a]': ['SAY done'], '[b]': ['SAY done'] }), (f) => f.close());
    const cases: Array<{ tag: string; entry: Record<string, string>; session: Record<string, string> }> = [
      { tag: 'a', entry: {}, session: { PGPASSFILE: '/secrets/team.pgpass', PROBE_SESSION: '1' } },
      {
        tag: 'b',
        entry: { PGPASSFILE: '${PGPASSFILE:-}', PGPASSWORD: '${PGPASSWORD:-}' },
        session: { PROBE_SESSION: '1' },
      },
    ];
    const out: Record<string, unknown> = {};
    for (const c of cases) {
      const log = join(sb.root, `env-${c.tag}`);
      const env = configureClaude(sb, fake, { probe: { command: 'sh', args: probeArgs(log), env: c.entry } });
      const r = await run(bin('claude'), claudeArgs(`[${c.tag}] hi`, { allowedTools: ['mcp__probe'] }), {
        cwd: sb.proj,
        env: { ...env, ...c.session },
        timeoutMs: 60_000,
        forward: [fake.port],
      });
      expect(r.code, describeRun(r)).toBe(0);
      out[c.tag] = seen(log);
    }
    expect(out).toEqual({
      a: { PGPASSFILE: '/secrets/team.pgpass', PROBE_SESSION: '1' },
      b: { PGPASSFILE: '', PGPASSWORD: '', PROBE_SESSION: '1' },
    });
  }, 150_000);

  it('Codex: only the variables `env_vars` lists that the session sets, an empty one included', async () => {
    const sb = sandbox('mcp-env-codex');
    const fake = defer(await startFakeResponses({ '[a]': ['SAY done'], '[b]': ['SAY done'] }), (f) => f.close());
    const env = configureCodex(sb, fake);
    trustCodexProject(sb, env);
    mkdirSync(join(sb.proj, '.codex'), { recursive: true });
    const cases: Array<{ tag: string; session: Record<string, string> }> = [
      { tag: 'a', session: { PGPASSFILE: '/secrets/team.pgpass', PROBE_SESSION: '1' } },
      { tag: 'b', session: { PGPASSWORD: '', PROBE_SESSION: '1' } },
    ];
    const out: Record<string, unknown> = {};
    for (const c of cases) {
      const log = join(sb.root, `env-${c.tag}`);
      writeFileSync(
        join(sb.proj, '.codex', 'config.toml'),
        `[mcp_servers.probe]\ncommand = "sh"\nargs = ${JSON.stringify(probeArgs(log))}\nrequired = true\nenv_vars = ["PGPASSWORD", "PGPASSFILE"]\n`,
      );
      const r = await run(bin('codex'), codexArgs(`[${c.tag}] hi`), {
        cwd: sb.proj,
        env: { ...env, ...c.session },
        timeoutMs: 60_000,
        forward: [fake.port],
      });
      expect(r.code, describeRun(r)).toBe(0);
      out[c.tag] = seen(log);
    }
    expect(out).toEqual({ a: { PGPASSFILE: '/secrets/team.pgpass' }, b: { PGPASSWORD: '' } });
  }, 150_000);
});
