// `opencomms doctor [--fix]` (operator.md "Command line"): one row per check, `[OK]` / `[WARN]` / `[FAIL]`.
// `--fix` does only what operator.md "Command line" allows: remove stale locks and temp files of ended processes, sweep
// in-flight mail of ended processes (protocol.md "Drain, commit, requeue, sweep"), and re-register a missing config entry for an
// installed OpenCode plugin bundle. It never installs an integration and never runs install-member.
import { statSync } from 'node:fs';
import { rm, unlink } from 'node:fs/promises';
import { bundleState, registerPlugin, planConfig } from '../../adapters/opencode/install.ts';
import { ok, type Refusal, type ToolResult } from '../protocol/result.ts';
import type { State } from '../protocol/schema.ts';
import { openRuntime, processAlive } from '../runtime/runtime.ts';
import { DAMAGE_REASONS, listArchives, listPins, resolvePaths, type Pin, type StorePaths } from '../store/index.ts';
import {
  corruptBackups,
  corruptJournals,
  isStaleLock,
  legacyStatePresent,
  loadState,
  lockAge,
  migrationMarker,
  row,
  shortId,
  tempFiles,
  unwritableDirs,
  type Row,
  type StateLoad,
} from './files.ts';
import { claudeRows, codexRows, memberIdRows, opencodeRows } from './hosts.ts';
import { boundStore } from './store.ts';

/** The oldest Node this package supports; keep equal to package.json `engines`. */
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
      return [
        row(
          'OK',
          'state',
          `schema v2, ${live} live channel(s), ${Object.keys(load.state.messages).length} live envelope(s)`,
        ),
      ];
    }
    case 'corrupt':
      return [
        row(
          'FAIL',
          'state',
          `state.json is corrupt (${load.cause}); the next operation preserves it as state.corrupt.<ms>.json and starts fresh`,
        ),
      ];
    case 'refused':
      return [row('FAIL', 'state', load.message)];
  }
}

const orphanedInFlight = (state: State) =>
  Object.values(state.messages).filter(
    (e) => e.delivery_status === 'in_flight' && (e.in_flight_by === null || !processAlive(e.in_flight_by)),
  );

function unboundSpawnRows(state: State): Row[] {
  const rows: Row[] = [];
  for (const ch of Object.values(state.channels))
    for (const m of ch.members)
      if (m.delivery_mode === 'spawn_push' && !m.host_session_id)
        rows.push(
          row(
            'WARN',
            'spawn_push members',
            `${m.role} on "${ch.name}" (${shortId(m.session_id)}) has no bound host session; its mail waits for opencomms_pull`,
          ),
        );
  return rows.length ? rows : [row('OK', 'spawn_push members', 'none unbound')];
}

async function pinRows(paths: StorePaths): Promise<Row[]> {
  const { pins, invalid, legacy } = await listPins(paths);
  const rows = invalid.map((f) =>
    row('FAIL', 'pin files', `pins/${f.file}: ${f.cause}; it is ignored (the file name must equal member_id)`),
  );
  if (pins.length)
    rows.push(
      row(
        'OK',
        'pin files',
        `${legacy ? 'legacy member-pin.json: ' : ''}${pins.map((p) => `${shortId(p.member_id)} (${p.host})`).join(', ')}`,
      ),
    );
  else if (!invalid.length) rows.push(row('OK', 'pin files', 'none'));
  return rows;
}

async function archiveRows(paths: StorePaths): Promise<Row[]> {
  const { archives, invalid } = await listArchives(paths);
  return [
    ...invalid.map((f) => row('WARN', 'archives', `archives/${f.file} is skipped: ${f.cause}`)),
    row('OK', 'archives', `${archives.length} saved channel(s)`),
  ];
}

export function nodeRow(version = process.versions.node): Row {
  const have = version.split('.').map(Number);
  const i = MIN_NODE.findIndex((n, k) => (have[k] ?? 0) !== n);
  const old = i !== -1 && (have[i] ?? 0) < MIN_NODE[i]!;
  return old
    ? row('FAIL', 'node', `Node ${version}; OpenComms needs ${MIN_NODE.join('.')} or newer`)
    : row('OK', 'node', `Node ${version}`);
}

/** The host rows need only the project's config files and pins, so they are printed even when
 *  `.opencomms` itself cannot be used. */
const hostRows = (project: string, pins: Pin[]): Row[] => [
  ...opencodeRows(project),
  ...claudeRows(project),
  ...codexRows(project),
  ...memberIdRows(project, pins),
];

/** `.opencomms` exists but is no directory: nothing in it can be read or repaired. */
const notADir = (paths: StorePaths) => statSync(paths.dir, { throwIfNoEntry: false })?.isDirectory() === false;

/** Damage entries quoted in the row: the newest, enough to find the files. */
const DAMAGE_SHOWN = 3;

/** Damage the store recorded (a preserved snapshot or journal): the newest entries, each naming
 *  what was kept where. */
function damageRows(state: State): Row[] {
  const found = state.errors.filter((e) => DAMAGE_REASONS.has(e.reason ?? ''));
  if (!found.length) return [row('OK', 'damage', 'none recorded')];
  const newest = found.slice(-DAMAGE_SHOWN).map((e) => `${new Date(e.at).toISOString()} ${e.reason}: ${e.message}`);
  return [
    row(
      'FAIL',
      'damage',
      `${found.length} recorded in state.errors; newest: ${newest.join(' | ')}. Inspect the preserved files it names; \`opencomms status\` lists the errors`,
    ),
  ];
}

async function storeRows(paths: StorePaths, now: number, load: StateLoad): Promise<Row[]> {
  const backups = await corruptBackups(paths);
  const journals = await corruptJournals(paths);
  const unwritable = await unwritableDirs(paths);
  const marker = await migrationMarker(paths.project);
  const age = await lockAge(paths, now);
  const temps = (await tempFiles(paths)).filter((t) => !t.alive);
  const orphans = load.kind === 'ok' ? orphanedInFlight(load.state) : [];
  const shown = (dir: string) =>
    dir === paths.project ? 'the project directory' : dir.slice(paths.project.length + 1);
  return [
    unwritable.length
      ? row(
          'FAIL',
          'writable',
          `${unwritable.map((u) => `${shown(u.dir)} (${u.code})`).join(', ')} refuses new files: every send, pull and channel change is refused (store_unwritable). Remount it read-write or give the user running OpenComms write permission`,
        )
      : row('OK', 'writable', 'the store can create its files'),
    ...(load.kind === 'ok' ? damageRows(load.state) : []),
    backups.length
      ? row(
          'WARN',
          'corrupt backups',
          `${backups.length} preserved corrupt state file(s): ${backups.join(', ')}; inspect, then delete them`,
        )
      : row('OK', 'corrupt backups', 'none'),
    journals.length
      ? row(
          'FAIL',
          'corrupt journals',
          `${journals.length} damaged journal(s) set aside: ${journals.join(', ')}; they may hold acknowledged changes the state lacks: inspect them before deleting`,
        )
      : row('OK', 'corrupt journals', 'none'),
    marker
      ? row('OK', 'migration', `migrated from schema 1 at ${marker}`)
      : legacyStatePresent(paths)
        ? row('WARN', 'migration', 'a schema-1 state in .opencode-comms/ is migrated by the next operation')
        : row('OK', 'migration', 'no schema-1 state'),
    age === null
      ? row('OK', 'lock', 'free')
      : isStaleLock(age)
        ? row(
            'WARN',
            'lock',
            `stale lock (${Math.round(age / 1000)} s without a refresh; its holder is gone); --fix removes it`,
          )
        : row('OK', 'lock', 'held by a live writer'),
    temps.length
      ? row(
          'WARN',
          'temp files',
          `${temps.length} left by ended processes (${temps.map((t) => t.file.slice(paths.dir.length + 1)).join(', ')}); --fix removes them`,
        )
      : row('OK', 'temp files', 'none left behind'),
    orphans.length
      ? row(
          'WARN',
          'in-flight mail',
          `${orphans.length} envelope(s) in flight for ended processes; --fix re-queues them`,
        )
      : row('OK', 'in-flight mail', 'none orphaned'),
  ];
}

/** A check that cannot run (a file where a directory belongs, an unreadable file) is a FAIL row
 *  naming the fault, never the end of the report. */
async function guarded(check: string, rows: () => Row[] | Promise<Row[]>): Promise<Row[]> {
  try {
    return await rows();
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return [
      row(
        'FAIL',
        check,
        `cannot be checked (${err.code ?? 'error'}: ${err.message}); fix the file it names, then run doctor again`,
      ),
    ];
  }
}

export async function diagnose(project: string, now: number): Promise<Row[]> {
  const paths = resolvePaths(project);
  if (notADir(paths))
    return [
      row(
        'FAIL',
        'state',
        `${paths.dir} is not a directory; OpenComms keeps its state, pins and bundles there: move that file away`,
      ),
      ...hostRows(project, []),
      nodeRow(),
    ];
  const { pins } = await listPins(paths);
  const bound = await boundStore(project);
  let load: StateLoad;
  try {
    load = bound?.load ?? (await loadState(paths));
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    load = {
      kind: 'refused',
      reason: 'state_unreadable',
      message: `state.json cannot be checked (${err.code ?? 'error'}: ${err.message}); fix the file it names, then run doctor again`,
    };
  }
  return [
    ...(bound?.rows ?? []),
    ...stateRows(load),
    ...(await guarded('store files', () => storeRows(paths, now, load))),
    ...(await guarded('opencode', () => opencodeRows(project))),
    ...(await guarded('claude-code', () => claudeRows(project))),
    ...(await guarded('codex', () => codexRows(project))),
    ...(await guarded('member ids', () => memberIdRows(project, pins))),
    ...(await guarded('pin files', () => pinRows(paths))),
    ...(await guarded('archives', () => archiveRows(paths))),
    ...(load.kind === 'ok' ? unboundSpawnRows(load.state) : []),
    nodeRow(),
  ];
}

/** Applies the fixes doctor may make (operator.md "Command line"); returns what it did. */
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
    fixed.push(
      r.ok
        ? `swept in-flight mail of ended processes: ${d?.requeued ?? 0} re-queued, ${d?.failed ?? 0} dead-lettered`
        : `sweep failed: ${r.message}`,
    );
  }
  const plan = planConfig(project);
  if (bundleState(project) !== 'absent' && !('ok' in plan) && !plan.registered) {
    const r = await registerPlugin(project);
    fixed.push(r.ok ? r.message : `re-registering the OpenCode plugin failed: ${r.message}`);
  }
  return fixed;
}

/** `project` is a directory, or the refusal that says why the given path is none: doctor still
 *  answers with rows, the project's as a FAIL. */
export async function doctor(
  project: string | Refusal,
  opts: { fix?: boolean; now?: () => number } = {},
): Promise<ToolResult<DoctorReport>> {
  const now = opts.now ?? Date.now;
  const usable = typeof project === 'string';
  const fixed = opts.fix && usable ? await repair(project, now()) : [];
  const rows = usable ? await diagnose(project, now()) : [row('FAIL', 'project', project.message), nodeRow()];
  const fails = rows.filter((r) => r.level === 'FAIL').length;
  const warns = rows.filter((r) => r.level === 'WARN').length;
  const summary = `${fails} failure(s), ${warns} warning(s)${opts.fix ? `, ${fixed.length} fix(es) applied` : ''}.`;
  // A FAIL row says what to run; doctor itself refuses nothing, so there is no reason code.
  return fails
    ? { ok: false, message: `${summary} Each [FAIL] row says what to do.`, data: { rows, fixed } }
    : ok(summary, { rows, fixed });
}
