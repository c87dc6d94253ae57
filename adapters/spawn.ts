// The hosts OpenComms can resume (spawn_push), by host label, and the spawner every edge runs with.
import { claudeSpawn } from './claude-code/spawn.ts';
import { codexSpawn } from './codex/spawn.ts';
import { Spawner, type Exec } from '../src/runtime/spawn.ts';

export const SPAWN_CONTRACTS = { 'claude-code': claudeSpawn, codex: codexSpawn } as const;
export const SPAWN_HOSTS: readonly string[] = Object.keys(SPAWN_CONTRACTS);

/** `OPENCOMMS_NO_SPAWN=1` keeps this process from spawning (the eligibility gate still applies). */
export const spawnDriver = (project: string, env: NodeJS.ProcessEnv = process.env, exec?: Exec) =>
  new Spawner({ project, contracts: SPAWN_CONTRACTS, enabled: env.OPENCOMMS_NO_SPAWN !== '1', env, exec });
