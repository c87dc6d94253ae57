// The `opencomms` command. Every refusal is a message and exit code 1, never a stack trace.
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { demo } from './demo.ts';
import { VERSION } from '../version.ts';
import { openRuntime } from '../runtime/runtime.ts';


const HELP = `opencomms ${VERSION} — messaging between AI coding sessions

Usage: opencomms <command> [--project DIR] [--json]

Commands:
  demo                 a scripted round trip in a throw-away project (what \`npm start\` runs)
  status               channels, members, pending mail and recent errors of the project
  install <host>       opencode | claude-code | codex: install the integration (claude-desktop:
                       print its manual config; chatgpt: not installable)
  uninstall <host>     remove only what install added (state, pins and archives stay)
  install-member [--host LABEL] [--id ID]
                       pin a member id for a host (default claude-code) and fill its MCP config
  bind --session ID [--host LABEL] [--id ID]
                       bind a host session (default codex: its thread id) to a pinned member
  mcp [--host LABEL] [--admin]
                       the MCP stdio server (identity from OPENCOMMS_MEMBER_ID)
  version              print the version
  help                 this text
`;

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        project: { type: 'string' },
        json: { type: 'boolean' },
        host: { type: 'string' },
        admin: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        id: { type: 'string' },
        name: { type: 'string' },
        session: { type: 'string' },
      },
    });
  } catch (e) {
    process.stderr.write(`opencomms: ${(e as Error).message}\nRun \`opencomms help\` for usage.\n`);
    return 1;
  }
  const { values, positionals } = parsed;
  const [cmd = 'help'] = positionals;
  const project = resolve(values.project ?? process.cwd());
  switch (cmd) {
    case 'help':
      process.stdout.write(HELP);
      return 0;
    case 'version':
      process.stdout.write(values.json ? `${JSON.stringify({ ok: true, message: `opencomms ${VERSION}`, data: { version: VERSION, schema: 2 } })}\n` : `opencomms ${VERSION} (state schema v2)\n`);
      return 0;
    case 'demo':
      return demo();
    case 'status': {
      const rt = openRuntime(project);
      const r = await rt.run({ op: 'operator_status' });
      await rt.close();
      if (values.json) process.stdout.write(`${JSON.stringify(r)}\n`);
      else process.stdout.write(renderStatus(project, r));
      return r.ok ? 0 : 1;
    }
    case 'install':
    case 'uninstall':
    case 'install-member':
    case 'bind': {
      const hosts = await import('./hosts.ts');
      const warn = (l: string) => process.stderr.write(`warning: ${l}\n`);
      const { result, code } =
        cmd === 'install' ? await hosts.install(positionals[1], project, { warn })
        : cmd === 'uninstall' ? await hosts.uninstall(positionals[1], project)
        : cmd === 'install-member' ? await hosts.installMember(project, { host: values.host, id: values.id ?? values.name })
        : await hosts.bindSession(project, { host: values.host, session: values.session, id: values.id ?? values.name });
      if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else (result.ok ? process.stdout : process.stderr).write(`${result.ok ? '' : 'opencomms: '}${result.message}\n`);
      return code;
    }
    case 'mcp': {
      const { runMcpServer } = await import('../../adapters/mcp/server.ts');
      return runMcpServer({ project, host: values.host, admin: values.admin === true });
    }
    default:
      process.stderr.write(`opencomms: unknown command "${cmd}". Run \`opencomms help\` for the list.\n`);
      return 1;
  }
}

function renderStatus(project: string, r: { ok: boolean; message: string; data?: Record<string, unknown> }): string {
  if (!r.ok) return `OpenComms ${VERSION} - project ${project}\n${r.message}\n`;
  const d = r.data as { channels: Array<{ name: string; paused: boolean; members: Array<{ role: string; host: string; delivery_mode: string; stale: boolean }> }>; total_messages: number; pending_messages: number; errors: Array<{ message: string }> };
  const lines = [`OpenComms ${VERSION} - project ${project}`, 'State schema: v2 at .opencomms/state.json',
    `${d.channels.length} channel(s), ${d.total_messages} message(s), ${d.pending_messages} pending`];
  for (const c of d.channels) {
    lines.push(`${c.name}${c.paused ? ' [PAUSED]' : ''}`);
    for (const m of c.members) lines.push(`  ${m.role} (${m.host}, delivery: ${m.delivery_mode})${m.stale ? ' [STALE]' : ''}`);
  }
  for (const e of d.errors.slice(-5)) lines.push(`error: ${e.message.slice(0, 140)}`);
  return `${lines.join('\n')}\n`;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('/src/cli/main.ts')) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (e) => {
    process.stderr.write(`opencomms: internal error: ${(e as Error).message}\n`);
    process.exit(1);
  });
}
