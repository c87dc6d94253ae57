// `opencomms doctor [--fix]` (FEATURES.md §9): one row per check, `[OK]` / `[WARN]` / `[FAIL]`.
// `--fix` does only what §9 allows: remove stale locks and temp files of ended processes, sweep
// in-flight mail of ended processes (§5.4), and re-register a missing config entry for an
// installed OpenCode plugin bundle. It never installs an integration and never runs install-member.
import { statSync } from 'node:fs';
import { rm, unlink } from 'node:fs/promises';
import { bundleState, registerPlugin, planConfig } from '../../adapters/opencode/install.ts';
import { ok, type ToolResult } from '../protocol/result.ts';
import type { State } from '../protocol/schema.ts';
import { openRuntime, processAlive } from '../runtime/runtime.ts';
import { listArchives, listPins, resolvePaths, type Pin, type StorePaths } from '../store/index.ts';
import {
  corruptBackups, isStaleLock, legacyStatePresent, loadState, lockAge, migrationMarker, row, shortId, tempFiles,
  type Row, type StateLoad,
} from './files.ts';
import { claudeRows, codexRows, memberIdRows, opencodeRows } from './hosts.ts';
import { boundStore } from './store.ts';

/** The oldest Node this package supports (package.json `engines`; chokidar 5 needs it). */
export const MIN_NODE = [20, 19, 0] as const;

export interface DoctorReport {
  rows: Row[];
  /** What --fix changed, in order; empty without --fix. */
  fixed: string[];
}

function stateRows(load: StateLoad): Row[] {
  switch (load.kind) {
    case 'absent':
      return [row('OK', 'state', 'no state.json yet; the first change creates it')];
    case 'ok': {
      const live = Object.values(load.state.channels).filter((c) => c.lifecycle === 'active').length;
      return [row('OK', 'state', `schema v2, ${live} live channel(s), ${Object.keys(load.state.messages).length} live envelope(s)`)];
    }
    case 'corrupt':
      return [row('FAIL', 'state', `state.json is corrupt (${load.cause}); the next operation preserves it as state.corrupt.<ms>.json and starts fresh`)];
    case 'refused':
      return [row('FAIL', 'state', load.message)];
  }
}

const orphanedInFlight = (state: State) =>
  Object.values(state.messages).filter((e) => e.delivery_status === 'in_flight' && (e.in_flight_by === null || !processAlive(e.in_flight_by)));

function unboundSpawnRows(state: State): Row[] {
  const rows: Row[] = [];
  for (const ch of Object.values(state.channels))
    for (const m of ch.members)
      if (m.delivery_mode === 'spawn_push' && !m.host_session_id)
        rows.push(row('WARN', 'spawn_push members', `${m.role} on "${ch.name}" (${shortId(m.session_id)}) has no bound host session; its mail waits for opencomms_pull`));
  return rows.length ? rows : [row('OK', 'spawn_push members', 'none unbound')];
}

async function pinRows(paths: StorePaths): Promise<Row[]> {
  const { pins, invalid, legacy } = await listPins(paths);
  const rows = invalid.map((f) => row('FAIL', 'pin files', `pins/${f.file}: ${f.cause}; it is ignored (the file name must equal member_id)`));
  if (pins.length)
    rows.push(row('OK', 'pin files', `${legacy ? 'legacy member-pin.json: ' : ''}${pins.map((p) => `${shortId(p.member_id)} (${p.host})`).join(', ')}`));
  else if (!invalid.length) rows.push(row('OK', 'pin files', 'none'));
  return rows;
}

async function archiveRows(paths: StorePaths): Promise<Row[]> {
  const { archives, invalid } = await listArchives(paths);
  return [
    ...invalid.map((f) => row('WARN', 'archives', `archives/${f.file} is skipped: ${f.cause}`)),
    row('OK', 'archives', `${archives.length} saved session(s)`),
  ];
}

export function nodeRow(version = process.versions.node): Row {
  const have = version.split('.').map(Number);
  const i = MIN_NODE.findIndex((n, k) => (have[k] ?? 0) !== n);
  const old = i !== -1 && (have[i] ?? 0) < MIN_NODE[i]!;
  return old ? row('FAIL', 'node', `Node ${version}; OpenComms needs ${MIN_NODE.join('.')} or newer`) : row('OK', 'node', `Node ${version}`);
}

/** The host rows need only the project's config files and pins, so they are printed even when
 *  `.opencomms` itself cannot be used. */
const hostRows = (project: string, pins: Pin[]): Row[] => [...opencodeRows(project), ...claudeRows(project), ...codexRows(project), ...memberIdRows(project, pins)];

/** `.opencomms` exists but is no directory: nothing in it can be read or repaired. */
const notADir = (paths: StorePaths) => statSync(paths.dir, { throwIfNoEntry: false })?.isDirectory() === false;

export async function diagnose(project: string, now: number): Promise<Row[]> {
  const paths = resolvePaths(project);
  if (notADir(paths))
    return [row('FAIL', 'state', `${paths.dir} is not a directory; OpenComms keeps its state, pins and bundles there: move that file away`), ...hostRows(project, []), nodeRow()];
  const { pins } = await listPins(paths);
  const bound = await boundStore(project);
  const load = bound?.load ?? (await loadState(paths));
  const backups = await corruptBackups(paths);
  const marker = await migrationMarker(project);
  const age = await lockAge(paths, now);
  const temps = (await tempFiles(paths)).filter((t) => !t.alive);
  const orphans = load.kind === 'ok' ? orphanedInFlight(load.state) : [];
  return [
    ...(bound?.rows ?? []),
    ...stateRows(load),
    backups.length
      ? row('WARN', 'corrupt backups', `${backups.length} preserved corrupt state file(s): ${backups.join(', ')}; inspect, then delete them`)
      : row('OK', 'corrupt backups', 'none'),
    marker
      ? row('OK', 'migration', `migrated from schema 1 at ${marker}`)
      : legacyStatePresent(paths)
        ? row('WARN', 'migration', 'a schema-1 state in .opencode-comms/ is migrated by the next operation')
        : row('OK', 'migration', 'no schema-1 state'),
    age === null
      ? row('OK', 'lock', 'free')
      : isStaleLock(age)
        ? row('WARN', 'lock', `stale lock (${Math.round(age / 1000)} s without a refresh; its holder is gone); --fix removes it`)
        : row('OK', 'lock', 'held by a live writer'),
    temps.length
      ? row('WARN', 'temp files', `${temps.length} left by ended processes (${temps.map((t) => t.file.slice(paths.dir.length + 1)).join(', ')}); --fix removes them`)
      : row('OK', 'temp files', 'none left behind'),
    orphans.length
      ? row('WARN', 'in-flight mail', `${orphans.length} envelope(s) in flight for ended processes; --fix re-queues them`)
      : row('OK', 'in-flight mail', 'none orphaned'),
    ...hostRows(project, pins),
    ...(await pinRows(paths)),
    ...(await archiveRows(paths)),
    ...(load.kind === 'ok' ? unboundSpawnRows(load.state) : []),
    nodeRow(),
  ];
}

/** Applies the fixes §9 allows; returns what it did. */
export async function repair(project: string, now: number): Promise<string[]> {
  const paths = resolvePaths(project);
  const fixed: string[] = [];
  if (notADir(paths)) return fixed;
  if (isStaleLock(await lockAge(paths, now))) {
    await rm(paths.lock, { recursive: true, force: true }).catch(() => {}); // a file; a directory from before the journal
    fixed.push('removed the stale lock .opencomms/.state.lock');
  }
  for (const t of await tempFiles(paths)) {
    if (t.alive) continue;
    await unlink(t.file).catch(() => {});
    fixed.push(`removed ${t.file.slice(paths.dir.length + 1)} (left by ended process ${t.pid})`);
  }
  // The sweep is a locked mutation: run only on a readable state, so --fix never triggers the
  // corrupt-file recovery (doctor reports that; the operator decides).
  const load = await loadState(paths);
  if (load.kind === 'ok' && orphanedInFlight(load.state).length) {
    const rt = openRuntime(project);
    const r = await rt.run({ op: 'sweep', alive: processAlive }).finally(() => rt.close());
    const d = r.data as { requeued?: number; failed?: number } | undefined;
    fixed.push(r.ok ? `swept in-flight mail of ended processes: ${d?.requeued ?? 0} re-queued, ${d?.failed ?? 0} dead-lettered` : `sweep failed: ${r.message}`);
  }
  const plan = planConfig(project);
  if (bundleState(project) !== 'absent' && !('ok' in plan) && !plan.registered) {
    const r = await registerPlugin(project);
    fixed.push(r.ok ? r.message : `re-registering the OpenCode plugin failed: ${r.message}`);
  }
  return fixed;
}

export async function doctor(project: string, opts: { fix?: boolean; now?: () => number } = {}): Promise<ToolResult<DoctorReport>> {
  const now = opts.now ?? Date.now;
  const fixed = opts.fix ? await repair(project, now()) : [];
  const rows = await diagnose(project, now());
  const fails = rows.filter((r) => r.level === 'FAIL').length;
  const warns = rows.filter((r) => r.level === 'WARN').length;
  const summary = `${fails} failure(s), ${warns} warning(s)${opts.fix ? `, ${fixed.length} fix(es) applied` : ''}.`;
  // A FAIL row says what to run; doctor itself refuses nothing, so there is no reason code.
  return fails ? { ok: false, message: `${summary} Each [FAIL] row says what to do.`, data: { rows, fixed } } : ok(summary, { rows, fixed });
}
