// Shared fixtures of the engine acceptance tests: a deterministic simulator around the pure engine
// (fixed `now`, a counter as id source), caller rows, and the refusal/success assertions every
// scenario uses.
import { expect } from 'vitest';
import { envelopeMachine } from '../../machines/index.ts';
import {
  apply,
  compactContext,
  type Caller,
  type Command,
  type Effect,
  type Env,
  type Held,
  type Outcome,
} from '../../src/engine/index.ts';
import type { Actor } from '../../src/engine/index.ts';
import type { DrainOptions } from '../../src/engine/deliver.ts';
import { ArchiveSchema, type Archive } from '../../src/protocol/archive.ts';
import type { Reason } from '../../src/protocol/result.ts';
import { emptyState, type Channel, type Envelope, type Member, type State } from '../../src/protocol/schema.ts';

export const T0 = 1_700_000_000_000;
export const PROJECT = 'proj-alpha';
export const WORKTREE = '/work/projects/alpha';

export type Mode = 'push' | 'pull' | 'spawn_push';

/** A caller row as an adapter would establish it. */
export function caller(sid: string, mode: Mode = 'push', extra: Partial<Caller> = {}): Caller {
  return {
    session_id: sid,
    host: mode === 'push' ? 'host-push' : 'host-mcp',
    surface: mode === 'push' ? 'cli' : 'mcp',
    delivery_mode: mode,
    host_session_id: mode === 'push' ? sid : null,
    project_id: PROJECT,
    worktree: WORKTREE,
    ...extra,
  };
}

export const hex32 = (n: number) => n.toString(16).padStart(32, '0');

type Prompt = Extract<Effect, { type: 'Prompt' }>;

/** The engine plus everything the shell would keep around it: the clock, the history log, the
 *  archive files. Every `run` is one locked mutation. */
export class Sim {
  state: State = emptyState();
  now = T0;
  by = 'p1@host';
  /** The machine the simulated process runs on (Env.machine); unset: one machine only. */
  machine: string | undefined = undefined;
  counter = 0;
  /** Host labels the shell can resume (spawn_push eligibility, §8.4). */
  spawnHosts: string[] = [];
  /** Envelopes the engine moved out of hot state (`writes.history`), in emission order. */
  history: Envelope[] = [];
  /** Archives written by saves, by channel id. */
  archives = new Map<string, Archive>();
  deletedArchives: string[] = [];

  env(): Env {
    return {
      now: this.now,
      by: this.by,
      ...(this.machine === undefined ? {} : { machine: this.machine }),
      mint: (prefix) => `${prefix}_${hex32(++this.counter)}`,
      spawnHosts: this.spawnHosts,
    };
  }

  advance(ms: number) {
    this.now += ms;
    return this;
  }

  /** What the shell reads outside the lock before a command (runtime `prepare`): a reply's parent
   *  that left hot state, a resumed channel's compact context, a channel's logged history. */
  prepare(cmd: Command): Command {
    const chOf = (raw: unknown) => this.state.channels[typeof raw === 'string' ? raw.trim().toLowerCase() : ''];
    switch (cmd.op) {
      case 'send': {
        const id = cmd.args.reply_to;
        if (cmd.parent || typeof id !== 'string' || !id || this.state.messages[id]) return cmd;
        const ch = chOf(cmd.args.channel);
        const parent = ch && this.logged(ch.id).find((e) => e.message_id === id);
        return parent ? { ...cmd, parent } : cmd;
      }
      case 'join': {
        if (cmd.compact_context !== undefined) return cmd;
        const parent = chOf(cmd.args.channel)?.parent_channel_id;
        const archive = parent ? this.archives.get(parent) : undefined;
        return archive ? { ...cmd, compact_context: compactContext(archive) } : cmd;
      }
      case 'history':
      case 'save_session': {
        if (cmd.logged) return cmd;
        const ch = chOf(cmd.args.channel);
        return ch ? { ...cmd, logged: this.logged(ch.id) } : cmd;
      }
      default:
        return cmd;
    }
  }

  /** A channel's history log, newest first (as the store reads it). */
  logged(channelId: string): Envelope[] {
    return this.history.filter((e) => e.channel_id === channelId).reverse();
  }

  run(cmd: Command): Outcome {
    const o = apply(this.state, this.prepare(cmd), this.env());
    this.state = o.state;
    if (o.writes?.history) this.history.push(...o.writes.history);
    if (o.writes?.archive) {
      const a = ArchiveSchema.parse(o.writes.archive);
      this.archives.set(a.channel_id, a);
    }
    if (o.writes?.deleteArchive) {
      this.archives.delete(o.writes.deleteArchive);
      this.deletedArchives.push(o.writes.deleteArchive);
    }
    for (const id of o.writes?.deleteHistory ?? []) this.history = this.history.filter((e) => e.channel_id !== id);
    return o;
  }

  /** A successful operation. */
  ok(cmd: Command): Outcome {
    const o = this.run(cmd);
    if (!o.result.ok) throw new Error(`expected ${cmd.op} to succeed: ${JSON.stringify(o.result)}`);
    expect(o.result.message.trim().length).toBeGreaterThan(0);
    return o;
  }

  /** A refusal: the reason code, a message that tells the agent what to do, and nothing changed. */
  refuse(cmd: Command, reason: Reason): Outcome {
    const before = structuredClone(this.state);
    const o = this.run(cmd);
    expect(o.result.ok, `${cmd.op} should be refused with ${reason}`).toBe(false);
    expect((o.result.data as { reason?: string } | undefined)?.reason).toBe(reason);
    expect(o.result.message.trim().length).toBeGreaterThan(10);
    expect(o.changed).toBe(false);
    expect(o.effects).toEqual([]);
    expect(o.writes).toBeUndefined();
    expect(o.state).toEqual(before);
    return o;
  }

  // ---- agent operations --------------------------------------------------------------------

  create(sid: string, channel: string, role: string, args: Record<string, unknown> = {}, mode: Mode = 'push') {
    return this.ok({
      op: 'create',
      caller: caller(sid, mode),
      args: { channel, role, role_prompt: `Act as ${role}.`, ...args },
    });
  }

  join(sid: string, channel: string, role: string, mode: Mode = 'push', extra: Partial<Caller> = {}) {
    return this.ok({
      op: 'join',
      caller: caller(sid, mode, extra),
      args: { channel, role, role_prompt: `Act as ${role}.` },
    });
  }

  /** A channel with the given members, the first one creating it. */
  channel(name: string, members: [sid: string, role: string, mode?: Mode][], args: Record<string, unknown> = {}) {
    const [first, ...rest] = members;
    this.create(first![0], name, first![1], args, first![2] ?? 'push');
    for (const [sid, role, mode] of rest) this.join(sid, name, role, mode ?? 'push');
    return this.ch(name);
  }

  send(sid: string, channel: string, content: string, args: Record<string, unknown> = {}) {
    return this.ok({ op: 'send', sid, args: { channel, content, ...args } });
  }

  drain(rid: string, opts?: DrainOptions) {
    return this.run({ op: 'drain', rid, ...(opts ? { opts } : {}) });
  }

  /** Commits a batch under the hold it was handed over with (this simulator's tag, the prompt's
   *  attempts) unless `held` names another. */
  commit(p: Prompt, method: 'push' | 'spawn_push' = 'push', held: Held = { by: this.by, attempts: p.attempts }) {
    return this.run({ op: 'commit', rid: p.recipient, message_ids: p.message_ids, method, held });
  }

  requeue(p: Prompt, error = 'host refused the prompt', held: Held = { by: this.by, attempts: p.attempts }) {
    return this.run({ op: 'requeue', rid: p.recipient, message_ids: p.message_ids, error, held });
  }

  // ---- lookups -----------------------------------------------------------------------------

  ch(name: string): Channel {
    const c = this.state.channels[name];
    if (!c) throw new Error(`no channel ${name}`);
    return c;
  }

  member(name: string, sid: string): Member {
    const m = this.ch(name).members.find((x) => x.session_id === sid);
    if (!m) throw new Error(`no member ${sid} on ${name}`);
    return m;
  }

  /** An envelope wherever it lives: hot state, else the history log it moved to. */
  msg(id: string): Envelope {
    const e = this.state.messages[id] ?? [...this.history].reverse().find((x) => x.message_id === id);
    if (!e) throw new Error(`no envelope ${id}`);
    return e;
  }

  /** Every envelope ever accepted: hot state plus the history log (latest copy wins). */
  everything(): Envelope[] {
    const all = new Map<string, Envelope>();
    for (const e of this.history) all.set(e.message_id, e);
    for (const e of Object.values(this.state.messages)) all.set(e.message_id, e);
    return [...all.values()];
  }

  /** Only a hot (state.json) envelope. */
  hot(id: string): Envelope | undefined {
    return this.state.messages[id];
  }

  /** Envelopes of a channel for a recipient, in creation order. */
  envelopesFor(rid: string, channel?: string): Envelope[] {
    const cid = channel ? this.ch(channel).id : undefined;
    return Object.values(this.state.messages).filter(
      (e) => e.recipient_session_id === rid && (!cid || e.channel_id === cid),
    );
  }

  queue(rid: string) {
    return this.state.queues[rid] ?? [];
  }
}

export const memberActor = (sid: string): Actor => ({ sid, project_id: PROJECT, worktree: WORKTREE });
export const operatorActor = (): Actor => ({ operator: true, project_id: 'cli-local-project', worktree: WORKTREE });

export const promptOf = (o: Outcome): Prompt | undefined => o.effects.find((e): e is Prompt => e.type === 'Prompt');
export const mustPrompt = (o: Outcome): Prompt => {
  const p = promptOf(o);
  if (!p) throw new Error(`expected a Prompt effect: ${JSON.stringify(o.result)}`);
  return p;
};
export const idsOf = (o: Outcome) => (o.result.data as { message_ids: string[] }).message_ids;
export const dataOf = <T = Record<string, unknown>>(o: Outcome) => o.result.data as T;

/** The envelope machine's transition table: `from` → event → the statuses it may lead to. */
export const ENVELOPE_TABLE: Record<string, Record<string, string[]>> = (() => {
  const table: Record<string, Record<string, string[]>> = {};
  for (const [from, node] of Object.entries(envelopeMachine.root.states)) {
    table[from] = {};
    for (const [event, defs] of node.transitions)
      table[from]![event] = defs.flatMap((d) => (d.target ?? []).map((t) => t.key));
  }
  return table;
})();

/** Why an envelope's `transitions` trail is not a path of the envelope machine, or null. */
export function trailError(e: Envelope): string | null {
  const trail = e.transitions;
  if (!trail.length) return `${e.message_id}: empty trail`;
  if (trail[0]![0] !== 'SEND' || trail[0]![1] !== 'pending')
    return `${e.message_id}: trail does not start with SEND → pending`;
  let prev = 'pending';
  let prevAt = trail[0]![2];
  for (const [event, to, at] of trail.slice(1)) {
    const allowed = ENVELOPE_TABLE[prev]?.[event] ?? [];
    if (!allowed.includes(to))
      return `${e.message_id}: ${prev} --${event}--> ${to} is not a transition of the envelope machine (trail ${JSON.stringify(trail)})`;
    if (at < prevAt) return `${e.message_id}: trail goes back in time`;
    prev = to;
    prevAt = at;
  }
  if (prev !== e.delivery_status)
    return `${e.message_id}: trail ends in ${prev}, delivery_status is ${e.delivery_status}`;
  return null;
}

/** Fails the test when an envelope's trail is not a path of the envelope machine. */
export function checkTrail(e: Envelope) {
  expect(trailError(e)).toBeNull();
}
