// Schema 1 → 2 migration (protocol.md "Loading (fail-closed)"). Runs inside load, under the lock, at most once.
import { existsSync } from 'node:fs';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { ROLE_RE, newChannelId } from '../../protocol/ids.ts';
import { MAX_ERRORS, SENTINEL_PROJECT_IDS } from '../../protocol/limits.ts';
import { emptyState, parseState } from '../../protocol/schema.ts';
import type { ErrorEntry, State } from '../../protocol/schema.ts';
import { writeAtomic } from './atomic.ts';
import { LEGACY_DIR, LEGACY_HOST } from '../paths.ts';
import type { StorePaths } from '../paths.ts';
import { statKey, type FileKey } from './file-key.ts';
import { saveState, serialize } from './state-file.ts';
import type { Pinned, SaveOptions } from './state-file.ts';

export const V1_ROLE_PROMPT = '(migrated from schema 1; no role prompt was recorded)';
const LEGACY_FILE = `${LEGACY_DIR}/state.json`;

/** Marker seen once = migration settled for the life of the process (rollback is manual). */
const markerSeen = new Set<string>();
/** Legacy files this process already rejected, by file identity: a tampered file is not re-read on
 *  every load, but a repaired one (new key) is tried again. */
const rejected = new Map<string, string>();
/** Tests: forget what this process learned, as a fresh process would. */
export function forgetMigrationMemo(): void {
  markerSeen.clear();
  rejected.clear();
}
const keyText = (k: FileKey) => `${k.dev}:${k.ino}:${k.size}:${k.mtimeNs}`;

/** Synchronous: it runs on every load until a marker exists, and a stat is cheaper than the hop. */
const exists = async (p: string) => existsSync(p);

/** A v2 state that only an operator's empty channels could have produced: nothing a migration
 *  could lose by replacing it. */
export function isPlaceholder(s: State): boolean {
  return (
    Object.keys(s.messages).length === 0 &&
    Object.keys(s.delivered_to).length === 0 &&
    Object.values(s.queues).every((q) => q.length === 0) &&
    Object.values(s.channels).every((c) => c.lifecycle === 'active' && c.members.length === 0)
  );
}

/** Cheap check, lock-free: does this load have to take the lock and run migrateV1? */
export async function migrationPending(paths: StorePaths, current: State | null): Promise<boolean> {
  if (markerSeen.has(paths.marker)) return false;
  if (await exists(paths.marker)) {
    markerSeen.add(paths.marker);
    return false;
  }
  const legacy = await statKey(paths.legacyState);
  if (!legacy) return false;
  if (current && !isPlaceholder(current)) return false; // real v2 state wins; no marker
  return rejected.get(paths.legacyState) !== keyText(legacy);
}

export interface Migrated {
  state: State;
  text: string;
  pin: Pinned;
}

/** Under the lock. Returns the state now on disk when something was written, else null. */
export async function migrateV1(
  paths: StorePaths,
  current: State | null,
  opts: SaveOptions & { now?: number } = {},
): Promise<Migrated | null> {
  const now = opts.now ?? Date.now();
  if (!(await migrationPending(paths, current))) return null; // settled by another process meanwhile
  const legacyKey = await statKey(paths.legacyState);
  let bytes: Buffer;
  try {
    bytes = await readFile(paths.legacyState);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') return null;
    return reject(paths, current, legacyKey, `unreadable (${err.code ?? 'EIO'})`, now, opts);
  }
  const conv = convertV1(bytes.toString('utf8'), paths.project);
  if (!conv.ok) return reject(paths, current, legacyKey, conv.cause, now, opts);

  const next = conv.state;
  for (const [name, ch] of Object.entries(current?.channels ?? {})) next.channels[name] ??= ch; // same name: v1 wins
  next.errors.push(...(current?.errors ?? []), {
    at: now,
    reason: 'state_migrated',
    message: `Migrated ${LEGACY_FILE} (schema 1) to schema 2; the legacy file was backed up as state.v1.bak.json and left in place.`,
  });
  next.errors = next.errors.slice(-MAX_ERRORS);

  opts.guard?.();
  await writeFile(paths.v1Backup, bytes); // the exact bytes that were validated and migrated
  if (current) await copyFile(paths.state, paths.v2EmptyBackup).catch(ignoreEnoent);
  const text = serialize(next);
  const pin = await saveState(paths, text, opts);
  const marker = { migrated_at: now, from: LEGACY_DIR, schema: 1 };
  await writeAtomic(paths.marker, `${JSON.stringify(marker, null, 2)}\n`, {
    tmpPrefix: '.marker',
    guard: opts.guard,
    durable: true,
  });
  markerSeen.add(paths.marker);
  return { state: next, text, pin };
}

const ignoreEnoent = (e: NodeJS.ErrnoException) => {
  if (e.code !== 'ENOENT') throw e;
};

/** A rejected legacy file is recorded once (the same message is never appended twice, so loads do
 *  not keep rewriting state) and no marker is written: it was not migrated, and fixing the file
 *  lets the next load migrate it. */
async function reject(
  paths: StorePaths,
  current: State | null,
  legacyKey: FileKey | null,
  cause: string,
  now: number,
  opts: SaveOptions,
): Promise<Migrated | null> {
  if (legacyKey) rejected.set(paths.legacyState, keyText(legacyKey));
  const message = `${LEGACY_FILE} (schema 1) was rejected and left untouched; nothing was migrated: ${cause}`;
  if (current?.errors.some((e) => e.message === message)) return null;
  const state = current ? structuredClone(current) : emptyState();
  state.errors = [...state.errors, { at: now, reason: 'state_v1_rejected', message } as ErrorEntry].slice(-MAX_ERRORS);
  const text = serialize(state);
  return { state, text, pin: await saveState(paths, text, opts) };
}

type Conversion = { ok: true; state: State } | { ok: false; cause: string };

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Schema-1 text → a backfilled v2 state. Members must satisfy the schema-1 rules; everything
 *  else is left to the v2 structural rules, so a tampered file fails one or the other. */
export function convertV1(text: string, project: string): Conversion {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, cause: 'not valid JSON' };
  }
  if (!isObj(raw)) return { ok: false, cause: 'root is not an object' };
  if (raw.schema_version !== 1)
    return { ok: false, cause: `schema_version is ${JSON.stringify(raw.schema_version)}, not 1` };
  const channels = raw.channels ?? {};
  if (!isObj(channels)) return { ok: false, cause: 'channels is not an object' };
  const rebuilt: Record<string, unknown> = {};
  for (const [key, ch] of Object.entries(channels)) {
    if (!isObj(ch) || !Array.isArray(ch.members)) return { ok: false, cause: `channels.${key}: no members array` };
    const members: unknown[] = [];
    for (const [i, m] of ch.members.entries()) {
      const bad = v1MemberProblem(m);
      if (bad) return { ok: false, cause: `channels.${key}.members.${i}: ${bad}` };
      const { session_id, role, role_prompt, joined_at } = m as {
        session_id: string;
        role: string;
        role_prompt?: string;
        joined_at: number;
      };
      members.push({
        session_id,
        role,
        joined_at,
        role_prompt: role_prompt?.trim() ? role_prompt : V1_ROLE_PROMPT, // v2 prompts are non-blank
        stale: false,
        stale_at: null,
        host: LEGACY_HOST,
        surface: 'cli',
        delivery_mode: 'push',
        host_session_id: session_id,
      });
    }
    rebuilt[key] = {
      ...ch,
      id: ch.id ?? newChannelId(),
      name: ch.name ?? key,
      project_id: ch.project_id ?? SENTINEL_PROJECT_IDS[0],
      worktree: ch.worktree ?? project,
      members,
    };
  }
  const parsed = parseState({
    ...raw,
    schema_version: 2,
    channels: rebuilt,
    messages: raw.messages ?? {},
    queues: raw.queues ?? {},
    delivered_to: raw.delivered_to ?? {},
    errors: raw.errors ?? [],
  });
  return parsed.ok ? parsed : { ok: false, cause: parsed.cause };
}

function v1MemberProblem(m: unknown): string | null {
  if (!isObj(m)) return 'not an object';
  if (typeof m.session_id !== 'string' || m.session_id === '') return 'session_id missing or empty';
  if (typeof m.role !== 'string' || !ROLE_RE.test(m.role)) return 'role missing or invalid';
  if (typeof m.joined_at !== 'number' || !Number.isFinite(m.joined_at)) return 'joined_at not a number';
  if (m.role_prompt !== undefined && typeof m.role_prompt !== 'string') return 'role_prompt not a string';
  return null;
}
