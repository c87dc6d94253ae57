// Codex's spawn contract (hosts.md "spawn_push"): `codex [prepend…] exec resume <thread> <batch>`.
import type { SpawnContract } from '../../src/runtime/spawn.ts';

export const codexSpawn: SpawnContract = {
  bin: 'codex',
  binEnv: 'OPENCOMMS_CODEX_BIN',
  args: (thread, text) => ['exec', 'resume', thread, text],
};
