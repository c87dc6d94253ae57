// The Store interface in memory: the same contract as FileStore (private drafts, nothing written on
// a throw or an unchanged outcome, history and archives kept aside, watchers told of every change)
// with no file system, for tests of the engine-and-runtime path and for embedding.
import type { Archive } from '../protocol/archive.ts';
import { applyOps } from '../protocol/draft.ts';
import { emptyState, type Envelope, type State } from '../protocol/schema.ts';
import type { InvalidFile } from './archives.ts';
import type { MutateOutcome, Store, Watch, WatchChange } from './types.ts';

export class MemoryStore implements Store {
  readonly location = 'memory';
  private state: State;
  private tail: Promise<unknown> = Promise.resolve();
  private readonly logs = new Map<string, Envelope[]>();
  private readonly saved = new Map<string, Archive>();
  private readonly watchers = new Set<(change: WatchChange) => Promise<void>>();

  constructor(initial: State = emptyState()) {
    this.state = structuredClone(initial);
  }

  async read(): Promise<State> {
    return structuredClone(this.state);
  }

  async peek(): Promise<Readonly<State>> {
    return this.state;
  }

  /** Nothing to follow: no other process writes this state. */
  async follow(): Promise<void> {}

  /** Every committed mutation replaces the state object, so a counter of them is the revision. */
  private revisions = 0;

  async revision(): Promise<string> {
    return String(this.revisions);
  }

  mutate<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    // One mutation at a time, in call order: the in-memory counterpart of the file lock.
    const run = this.tail.then(() => {
      const draft = structuredClone(this.state);
      const out = fn(draft);
      if (!out.changed) return out.result;
      if (out.ops) applyOps(draft, out.ops);
      for (const e of out.history ?? []) this.logs.set(e.channel_id, [...(this.logs.get(e.channel_id) ?? []), structuredClone(e)]);
      if (out.archive) this.saved.set(out.archive.channel_id, structuredClone(out.archive));
      this.state = draft;
      this.revisions++;
      if (out.deleteArchive) this.saved.delete(out.deleteArchive);
      for (const id of out.deleteHistory ?? []) this.logs.delete(id);
      const archives = out.archive !== undefined || out.deleteArchive !== undefined;
      for (const w of this.watchers) void w({ archives }).catch(() => {});
      return out.result;
    });
    this.tail = run.catch(() => {});
    return run;
  }

  async watch(onChange: (change: WatchChange) => Promise<void>): Promise<Watch> {
    this.watchers.add(onChange);
    return { close: async () => void this.watchers.delete(onChange) };
  }

  async history(channelId: string, limit: number): Promise<Envelope[]> {
    const out: Envelope[] = [];
    const seen = new Set<string>();
    for (const e of [...(this.logs.get(channelId) ?? [])].reverse()) {
      if (out.length >= limit) break;
      if (seen.has(e.message_id)) continue;
      seen.add(e.message_id);
      out.push(structuredClone(e));
    }
    return out;
  }

  async historyIds(channelId: string): Promise<Set<string>> {
    return new Set((this.logs.get(channelId) ?? []).map((e) => e.message_id));
  }

  async findInHistory(channelId: string, messageId: string, maxScan: number): Promise<Envelope | null> {
    const log = this.logs.get(channelId) ?? [];
    const hit = log.slice(-maxScan).reverse().find((e) => e.message_id === messageId);
    return hit ? structuredClone(hit) : null;
  }

  async archive(id: string): Promise<Archive | null> {
    const a = this.saved.get(id);
    return a ? structuredClone(a) : null;
  }

  async archiveByName(name: string): Promise<Archive | null> {
    const wanted = name.trim().toLowerCase();
    return (await this.archives()).archives.find((a) => a.name.toLowerCase() === wanted) ?? null;
  }

  async archives(): Promise<{ archives: Archive[]; invalid: InvalidFile[] }> {
    const archives = [...this.saved.values()].map((a) => structuredClone(a)).sort((a, b) => b.saved_at - a.saved_at);
    return { archives, invalid: [] };
  }

  async close(): Promise<void> {
    this.watchers.clear();
  }
}
