// Every `opencomms` command, in the order `opencomms help` lists them. A new command is one
// module under commands/ and one line here.
import type { CliCommand } from './command.ts';
import { channels } from './commands/channels.ts';
import { codexCommand } from './commands/codex.ts';
import { consoleCommands } from './commands/console.ts';
import { demoCommand } from './commands/demo.ts';
import { doctor } from './commands/doctor.ts';
import { install } from './commands/install.ts';
import { joinCommandCli } from './commands/join-command.ts';
import { mcp } from './commands/mcp.ts';
import { pauseCommands } from './commands/pause.ts';
import { channel } from './commands/channel.ts';
import { speak } from './commands/speak.ts';
import { status } from './commands/status.ts';
import { store } from './commands/store.ts';
import { usageCommands } from './commands/usage.ts';
import { version } from './commands/version.ts';
import { watch } from './commands/watch.ts';

export const COMMANDS: readonly CliCommand[] = [
  status,
  channels,
  pauseCommands,
  usageCommands,
  speak,
  channel,
  joinCommandCli,
  watch,
  consoleCommands,
  doctor,
  store,
  install,
  mcp,
  codexCommand,
  demoCommand,
  version,
];
