// The store behind the runtime, as one small interface (pg-boss keeps its database behind one the
// same way): the engine and runtime never name a file. `FileStore` (state.json under a file lock)
// is the embedded default, `MemoryStore` serves tests, and a networked store (row locks for drains,
// LISTEN/NOTIFY for wake) implements the same methods later. Only the edges build a concrete store.
import type { Archive, ArchiveHead } from '../protocol/archive.ts';
import type { Op } from '../protocol/draft.ts';
import type { Envelope, SessionsState, State } from '../protocol/schema.ts';

/** A record the store holds but cannot read (an archive or a pin): named, with why, for doctor. */
export interface InvalidFile {
  file: string;
  cause: string;
}

export interface MutateOutcome<T> {
  changed: boolean;
  result: T;
  /** The changes as operations on the state, made here instead of through the draft (a planned
   *  send, engine/send.ts): the store applies them as a replay does, checks and journals them. */
  ops?: readonly Op[];
  /** Envelopes leaving live state for the channel history logs (written before the state). */
  history?: Envelope[];
  /** An archive to write before the state (a saved channel's messages leave state with it). */
  archive?: Archive;
  /** Removed after the state is written (a deleted session's archive and history log). */
  deleteArchive?: string;
  deleteHistory?: string[];
}

export interface Subscription {
  close(): Promise<void>;
}

/** What a subscriber callback is told besides "look again". */
export interface StoreChange {
  /** An archive was written or removed since the last call (the state itself may be unchanged:
   *  an archive restored from a backup, or removed by hand). */
  archives: boolean;
}

/** Leases of processes, as the store's clock judges them at one moment. */
export interface LeaseView {
  /** Tags whose lease has not expired. */
  live: ReadonlySet<string>;
  /** Per tag with a row: milliseconds until its lease expires (negative: expired that long ago). */
  left: ReadonlyMap<string, number>;
}

/** A store several machines share keeps leases (a store one machine uses needs none: PIDs do). */
export interface LeaseStore {
  /** Renews `tag`'s lease for `ms` on the store's clock, and answers everyone's in the same query. */
  renew(tag: string, machine: string, ms: number): Promise<LeaseView>;
  snapshot(): Promise<LeaseView>;
  /** Ends `tag`'s lease (a clean exit): others see it gone at once. */
  release(tag: string): Promise<void>;
}

/** The one channel a call reads and writes, as its key in `state.channels`, looked up on the state
 *  the store holds (which may lack what was done since in channels out of this process's focus);
 *  null: the call may read anything (the store brings every channel up to date first). */
export type Scope = (state: Readonly<State>) => string | null;

export interface Store {
  /** Present when processes of other machines may share the store. */
  readonly leases?: LeaseStore;
  /** Where the state lives, for logs and operator output. */
  readonly location: string;
  /** A private copy of the current state; fail-closed (refusals are thrown as RefusalError). */
  read(): Promise<State>;
  /** The current state without a copy where possible: the caller must not change it, and it may
   *  change in place under the caller at the next mutation (copy with `read()` to keep one). With
   *  a scope, a store that keeps a focus (`focus`) may bring only that channel and the ones in
   *  focus up to date ('focus': only those): the rest may be behind. */
  peek(scope?: Scope | 'focus'): Promise<Readonly<State>>;
  /** Background catch-up between calls, so the next call finds less to do: what `peek` does,
   *  except that it may leave work to the next call (a snapshot being replaced at this moment).
   *  It answers nobody; a read never skips. true when it applied anything (the next may come soon). */
  catchUp(): Promise<boolean>;
  /** What the session reads show of the current state, where the store can answer it without
   *  loading the whole state; null (or no such method): read the state. */
  sessions?(): Promise<SessionsState | null>;
  /** A token that changes whenever the state changes (the live object itself may not). */
  revision(): Promise<string>;
  /** Readies the store for a first mutation that must be quick, writing nothing (PostgreSQL: the
   *  connection's server process compiles the commit); a store with nothing to ready has none. */
  warm?(): Promise<void>;
  /** `fn` changes a private draft under the store's lock; nothing is written unless it reports a
   *  change, and nothing at all if it throws. With a scope, `fn` reads and writes that one channel
   *  only: a store that keeps a focus then orders it after the changes of that channel (and of
   *  none) only, and applies no other channel's (a change that writes beyond it is taken whole). */
  mutate<T>(fn: (draft: State) => MutateOutcome<T>, scope?: Scope): Promise<T>;
  /** This process serves the channels `select` names on the state (keys of `state.channels`,
   *  asked again whenever a change of no one channel, a join or a leave among them, is applied):
   *  its subscribers are told of their changes (and of changes of no one channel) only, and
   *  `peek('focus')` brings only them up to date. A store that keeps every process whole has none. */
  focus?(select: (state: Readonly<State>) => readonly string[]): void;
  /** Calls `onChange` (never concurrently with itself) whenever another process may have changed
   *  the state or its archives; resolves once subscribed. */
  subscribe(onChange: (change: StoreChange) => Promise<void>, log: (line: string) => void): Promise<Subscription>;
  /** A channel's envelopes that left live state, newest first, one per message id. */
  history(channelId: string, limit: number): Promise<Envelope[]>;
  /** Every distinct message id in a channel's history. */
  historyIds(channelId: string): Promise<Set<string>>;
  /** One envelope of a channel's history by id, among the newest `maxScan`. */
  findInHistory(channelId: string, messageId: string, maxScan: number): Promise<Envelope | null>;
  /** An archive by channel id (null for a bad id, a missing or an invalid one). */
  archive(id: string): Promise<Archive | null>;
  /** The newest archive whose name matches case-insensitively. */
  archiveByName(name: string): Promise<Archive | null>;
  /** Every valid archive's head (no messages), newest first, and the invalid ones (doctor
   *  reports them). */
  archives(): Promise<{ archives: ArchiveHead[]; invalid: InvalidFile[] }>;
  close(): Promise<void>;
}

/** A look at a project's mail without its store (glance.ts): no mail for certain (`absent`), the
 *  raw state to decide from, or `unknown` (take the full path). */
export type Glance = { kind: 'absent' } | { kind: 'unknown' } | { kind: 'state'; state: Record<string, unknown> };
