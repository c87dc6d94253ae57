// Claude Code's spawn contract (FEATURES.md §8.4): `claude [prepend…] --resume <session> --print <batch>`.
import type { SpawnContract } from '../../src/runtime/spawn.ts';

export const claudeSpawn: SpawnContract = {
  bin: 'claude',
  binEnv: 'OPENCOMMS_CLAUDE_BIN',
  args: (session, text) => ['--resume', session, '--print', text],
};
