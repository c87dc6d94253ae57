// The engine's vocabulary: who is calling, what comes out. Host-neutral: adapters translate.
import type { Archive } from '../protocol/archive.ts';
import type { Envelope, State } from '../protocol/schema.ts';
import type { ToolResult } from '../protocol/result.ts';

/** The caller of an agent operation, as the adapter established it (never from arguments). */
export interface Caller {
  session_id: string;
  host: string;
  surface: string;
  delivery_mode: string;
  host_session_id: string | null;
  project_id: string;
  /** Normalised absolute path (the shell normalises; the engine compares strings). */
  worktree: string;
}

/** The operator (CLI, console): sees everything, bound by no coordinator rule. */
export interface OperatorCaller {
  operator: true;
  project_id: string;
  worktree: string;
}

/** Everything an operation needs from outside the state, so the engine stays pure. */
export interface Env {
  now: number;
  /** The process tag (`"<pid>@<hostname>/<machine id>"`) of the process running the operation (in_flight_by). */
  by: string;
  /** Mints ids (`ocm_`, `chn_`, `cor_`); the shell passes a random source, tests a counter. */
  mint: (prefix: 'ocm' | 'chn' | 'cor') => string;
  /** The machine the operation runs on (src/runtime/machine.ts); absent: one machine only. */
  machine?: string;
  /** Host labels whose host sessions the shell can continue (spawn_push); none when absent. */
  spawnHosts?: readonly string[];
}

/** What a commit or requeue proves it holds: the process tag the batch was drained under and, per
 *  message id in order, the attempt it was handed over at (the Prompt effect's `attempts`). */
export interface Held {
  by: string;
  attempts: readonly number[];
}

/** Data, run by the shell after the state is saved and the lock released. */
export type Effect =
  /** Hand a drained batch to the recipient's host; answer with commitDelivery / requeueDelivery. */
  | {
      type: 'Prompt';
      recipient: string;
      channel_ids: string[];
      message_ids: string[];
      text: string;
      mode: string;
      /** Per message id, the attempt of this hand-over: the token its commit or requeue names. */
      attempts: number[];
      /** Some envelope was handed over before (a crash or a failed prompt): check the host first. */
      redelivery: boolean;
    }
  /** These recipients have new pending mail: their owner process should drain. */
  | { type: 'Wake'; recipients: string[] }
  /** Something becomes due at `at` (cooldown end, retry, stale deadline): send TICK then. */
  | { type: 'ScheduleAt'; at: number; recipient: string };

/** What the store must write before it saves state, inside the same lock. */
export interface Writes {
  /** Terminal envelopes leaving hot state for the per-channel history log. */
  history?: Envelope[];
  archive?: Archive;
  deleteArchive?: string;
  deleteHistory?: string[];
}

export interface Outcome<D extends object = Record<string, unknown>> {
  state: State;
  result: ToolResult<D>;
  effects: Effect[];
  changed: boolean;
  writes?: Writes;
}
