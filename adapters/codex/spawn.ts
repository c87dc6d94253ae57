// Codex's spawn contract (FEATURES.md §8.4): `codex [prepend…] exec resume <thread> <batch>`.
import type { SpawnContract } from '../../src/runtime/spawn.ts';

export const codexSpawn: SpawnContract = {
  bin: 'codex',
  binEnv: 'OPENCOMMS_CODEX_BIN',
  args: (thread, text) => ['exec', 'resume', thread, text],
};
