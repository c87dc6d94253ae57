// Claude Code's spawn contract (hosts.md "spawn_push"): `claude [prepend…] --resume <session> --print <batch>`.
import type { SpawnContract } from '../../src/runtime/spawn.ts';

export const claudeSpawn: SpawnContract = {
  bin: 'claude',
  binEnv: 'OPENCOMMS_CLAUDE_BIN',
  args: (session, text) => ['--resume', session, '--print', text],
};
