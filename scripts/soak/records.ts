// The soak's own evidence: one JSON object per line, appended and fsync'd before the caller goes
// on, so a line that exists was written before anything the process did afterwards, and a SIGKILL
// can only cut the line being written (a torn last line is skipped on read).
import { closeSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';

export class DurableLog {
  private readonly fd: number;
  constructor(file: string) {
    this.fd = openSync(file, 'a');
  }
  append(record: object): void {
    writeSync(this.fd, `${JSON.stringify(record)}\n`);
    fsyncSync(this.fd);
  }
  close(): void {
    closeSync(this.fd);
  }
}

/** Every whole line of a log; a line cut by a kill (only ever the last) is dropped. */
export function readLog<T>(file: string): T[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const out: T[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // the torn tail of a killed writer
    }
  }
  return out;
}

/** What a writer records: each accepted or refused send (right after the call returned) and each
 *  pull's messages. `seq` counts the incarnation's actions, so an action the store saw but the log
 *  does not can only be the incarnation's last one. */
export type WriterRecord =
  | {
      kind: 'sent';
      inc: number;
      seq: number;
      at: number;
      channel: string;
      ids: string[];
      broadcast: boolean;
      reply_to: string | null;
    }
  | { kind: 'refused'; inc: number; seq: number; at: number; channel: string; reason: string }
  | { kind: 'pulled'; inc: number; seq: number; at: number; ids: string[] };

/** What an owner's driver records for every prompt it accepts, before `deliver` resolves. */
export interface PromptRecord {
  inc: number;
  pid: number;
  rid: string;
  at: number;
  ids: string[];
  redelivery: boolean;
  /** Every id of the batch is named in the prompt text's frame headers. */
  framed: boolean;
}

/** What the state checker records: one line per failed read (cause), per read the store refused
 *  with a stable reason (its server restarting), per late commit the store fenced (`hold_lost`,
 *  once each), and a closing tally. */
export type CheckRecord =
  | { kind: 'failure'; at: number; cause: string }
  | { kind: 'refused'; at: number; reason: string }
  | { kind: 'fenced'; at: number; message: string }
  | { kind: 'tally'; at: number; reads: number };

/** A whole computer out (`--machines`): killed or partitioned from `from` to `to`. */
export interface Outage {
  machine: number;
  kind: 'kill' | 'partition';
  /** The processes (member names) that ran on it. */
  names: string[];
  from: number;
  to: number;
  /** Envelopes in flight under its processes when it went. */
  held: number;
  /** Of those, how many no sweep had put back in their queue by the time it came back. */
  unswept: number;
  /** Per swept envelope: from its holder's last lease renewal to the sweep, ms. */
  sweep_ms: number[];
}

/** One process's life as the harness saw it. */
export interface Incarnation {
  name: string;
  inc: number;
  pid: number;
  started_at: number;
  ended_at: number | null;
  killed: boolean;
  /** Exit code or signal when it ended without being killed (a crash: must not happen). */
  exit: string | null;
}
