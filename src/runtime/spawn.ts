// Spawn delivery (hosts.md "spawn_push"), host-neutral: continue a member's host session with its CLI and
// the framed batch as ONE argv element, always last. execFile with no shell: peer text is never
// parsed by anything. Adapters give the argv contract per host label; this file owns the gate, the
// executable override, the size check before draining and the error records (never argv, never
// output). The in-flight guard, drain, commit/requeue and re-drain timers are the delivery policy's.
import { execFile } from 'node:child_process';
import { spawnEligible } from '../engine/eligibility.ts';
import type { DrainOptions } from '../engine/deliver.ts';
import { memberships } from '../engine/lookup.ts';
import { spawnPreview } from '../engine/spawn-preview.ts';
import type { Member, State } from '../protocol/schema.ts';
import type { SpawnDriver, SpawnerRuntime } from './delivery.ts';
import { SPAWN_ARG_MAX_BYTES, SPAWN_CMDLINE_MAX_WIN32, SPAWN_MAX_OUTPUT_BYTES, SPAWN_TIMEOUT_MS } from './limits.ts';

export interface SpawnContract {
  /** The CLI's executable name when no override is set. */
  bin: string;
  /** Environment variable holding an override: a path, or a template whose first token is the
   *  executable and the rest are prepended to the arguments. */
  binEnv: string;
  /** Arguments after the executable and any prepended ones; `text` must be the last element. */
  args(hostSessionId: string, text: string): string[];
}

/** Runs the CLI for `member`; resolves with its exit code (null = killed by a signal), rejects when it could not start. */
export type Exec = (file: string, args: string[], opts: { cwd: string; member: string }) => Promise<number | null>;

/** The spawned run's environment: ours, with OPENCOMMS_MEMBER_ID naming the recipient. The installed
 *  configs let a session's own OPENCOMMS_MEMBER_ID decide its member, so the spawning server's id
 *  must never reach the run it starts for another member. */
export const spawnEnv = (member: string, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv => ({
  ...env,
  OPENCOMMS_MEMBER_ID: member,
});

const realExec: Exec = (file, args, opts) =>
  new Promise((resolve, reject) => {
    const o = {
      cwd: opts.cwd,
      env: spawnEnv(opts.member),
      shell: false,
      windowsHide: true,
      timeout: SPAWN_TIMEOUT_MS,
      maxBuffer: SPAWN_MAX_OUTPUT_BYTES,
    };
    const child = execFile(file, args, o, (err) => {
      if (!err) return resolve(0);
      const e = err as NodeJS.ErrnoException & { code?: unknown; signal?: string | null };
      if (typeof e.code === 'number') return resolve(e.code);
      if (e.signal) return resolve(null);
      reject(e);
    });
    child.stdin?.end(); // a CLI that reads extra input from a piped stdin must see it end
  });

/** `OPENCOMMS_*_BIN` → executable + prepended args. Only `"` groups; no escapes, no shell rules. */
export function parseTemplate(raw: string): { file: string; prepend: string[] } | { error: string } {
  const tokens: string[] = [];
  let cur = '';
  let quoted = false;
  let inToken = false;
  for (const c of raw.trim()) {
    if (c === '"') {
      quoted = !quoted;
      inToken = true;
    } else if (!quoted && /\s/.test(c)) {
      if (inToken) tokens.push(cur);
      cur = '';
      inToken = false;
    } else {
      cur += c;
      inToken = true;
    }
  }
  if (quoted) return { error: 'has an unterminated " quote' };
  if (inToken) tokens.push(cur);
  if (!tokens.length) return { error: 'is empty' };
  return { file: tokens[0]!, prepend: tokens.slice(1) };
}

export interface SpawnerOptions {
  project: string;
  contracts: Readonly<Record<string, SpawnContract>>;
  enabled: boolean;
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  exec?: Exec;
}

export class Spawner implements SpawnDriver {
  readonly method = 'spawn_push' as const;
  readonly hosts: readonly string[];
  readonly enabled: boolean;
  private rt: SpawnerRuntime | null = null;
  /** Problems reported once per process: a message too large to ever spawn, a broken override. */
  private readonly reported = new Set<string>();

  constructor(private readonly o: SpawnerOptions) {
    this.hosts = Object.keys(o.contracts);
    this.enabled = o.enabled;
  }

  attach(rt: SpawnerRuntime) {
    this.rt = rt;
  }

  private get runtime(): SpawnerRuntime {
    if (!this.rt) throw new Error('spawner used before it was attached to a runtime');
    return this.rt;
  }

  private eligibleRow(state: Readonly<State>, rid: string): Member | undefined {
    return memberships(state, rid).find(({ m }) => spawnEligible(m, this.hosts))?.m;
  }

  /** The executable and prepended args for a host, or null (the problem is reported once). */
  private async command(host: string, rid: string): Promise<{ file: string; prepend: string[] } | null> {
    const c = this.o.contracts[host]!;
    const raw = (this.o.env ?? process.env)[c.binEnv];
    const parsed = raw?.trim() ? parseTemplate(raw) : { file: c.bin, prepend: [] };
    if ('error' in parsed) {
      await this.reportOnce(
        `template:${c.binEnv}`,
        rid,
        `${c.binEnv} ${parsed.error}; spawn delivery to ${rid} is off until it is fixed.`,
      );
      return null;
    }
    if ((this.o.platform ?? process.platform) === 'win32' && /\.(cmd|bat)$/i.test(parsed.file)) {
      await this.reportOnce(
        `shim:${parsed.file}`,
        rid,
        `${c.binEnv} names a .cmd/.bat shim, which Node cannot start without a shell; point it at the real executable.`,
      );
      return null;
    }
    return parsed;
  }

  private async reportOnce(key: string, rid: string, message: string) {
    if (this.reported.has(key)) return;
    this.reported.add(key);
    await this.runtime.run({ op: 'record_error', entry: { at: this.runtime.env().now, message, session_id: rid } });
  }

  /** The gate, then the size check on pending mail without draining. */
  async bounds(rid: string): Promise<DrainOptions | null> {
    const state = await this.runtime.read();
    const row = this.eligibleRow(state, rid);
    if (!row) return null; // ineligible: the mail waits for opencomms_pull and never ages out (protocol.md "Delivery modes")
    const cmd = await this.command(row.host, rid);
    if (!cmd) return null;
    const maxSize = this.argBudget(cmd, this.o.contracts[row.host]!.args(row.host_session_id!, ''));
    const preview = spawnPreview(state, rid, this.runtime.env(), maxSize);
    if (preview.kind === 'too_large') {
      await this.reportOnce(
        `size:${preview.message_id}`,
        rid,
        `Message ${preview.message_id} for ${rid} is larger than one command-line argument can carry (${maxSize} bytes framed); it was not spawned and waits for opencomms_pull.`,
      );
      return null;
    }
    return { maxSize };
  }

  /** Bytes the framed batch may take: one argv element on POSIX; on Windows the whole command
   *  line is bounded, so the fixed part is taken off. */
  private argBudget(cmd: { file: string; prepend: string[] }, fixedArgs: string[]): number {
    if ((this.o.platform ?? process.platform) !== 'win32') return SPAWN_ARG_MAX_BYTES;
    const fixed = [cmd.file, ...cmd.prepend, ...fixedArgs].reduce((n, a) => n + Buffer.byteLength(a) + 3, 0);
    return Math.max(0, SPAWN_CMDLINE_MAX_WIN32 - fixed);
  }

  /** Continue the host session with the batch; exit 0 = the host took it. */
  async deliver(rid: string, text: string): Promise<void> {
    const state = await this.runtime.read();
    const row = this.eligibleRow(state, rid);
    if (!row) throw new Error('spawn delivery: the member is no longer eligible (unbound or not spawn_push)');
    const cmd = await this.command(row.host, rid);
    if (!cmd) throw new Error(`spawn delivery: no usable ${row.host} executable`);
    const args = [...cmd.prepend, ...this.o.contracts[row.host]!.args(row.host_session_id!, text)];
    let code: number | null;
    try {
      code = await (this.o.exec ?? realExec)(cmd.file, args, { cwd: this.o.project, member: rid });
    } catch (e) {
      const errno = (e as NodeJS.ErrnoException).code ?? 'error';
      const hint = errno === 'EINVAL' ? ` (point ${this.o.contracts[row.host]!.binEnv} at the real executable)` : '';
      throw new Error(`spawn delivery (${row.host}) could not start ${cmd.file}: ${errno}${hint}`);
    }
    if (code !== 0)
      throw new Error(
        `spawn delivery (${row.host}) failed: ${code === null ? 'killed by a signal' : `exit code ${code}`}`,
      );
  }
}
