// The Store interface in memory: the same contract as FileStore (private drafts, nothing written on
// a throw or an unchanged outcome, what is written checked first, history and archives kept aside,
// subscribers told of every change) with no file system, for tests of the engine-and-runtime path and
// for embedding. Several instances share one project through `sibling()`, as processes share a
// project directory.
import { type Archive, archiveNamed } from '../protocol/archive.ts';
import { applyOps, detach, track } from '../protocol/draft.ts';
import { emptyState, type Envelope, type State } from '../protocol/schema.ts';
import type { InvalidFile, MutateOutcome, Store, Subscription, StoreChange } from './types.ts';
import { checkOps } from './validate.ts';
import { Subscriber } from './subscriber.ts';

/** What the instances of one project share. */
class MemoryProject {
  state: State;
  /** Every committed mutation replaces the state object, so a counter of them is the revision. */
  revisions = 0;
  tail: Promise<unknown> = Promise.resolve();
  readonly logs = new Map<string, Envelope[]>();
  readonly saved = new Map<string, Archive>();
  readonly subscribers = new Set<Subscriber>();

  constructor(initial: State) {
    this.state = structuredClone(initial);
  }
}

export class MemoryStore implements Store {
  readonly location = 'memory';
  private readonly project: MemoryProject;
  private readonly mine = new Set<Subscriber>();

  constructor(initial: State | MemoryProject = emptyState()) {
    this.project = initial instanceof MemoryProject ? initial : new MemoryProject(initial);
  }

  /** Another instance on the same project (another process, in a test). */
  sibling(): MemoryStore {
    return new MemoryStore(this.project);
  }

  private get state() {
    return this.project.state;
  }

  private get logs() {
    return this.project.logs;
  }

  private get saved() {
    return this.project.saved;
  }

  async read(): Promise<State> {
    return structuredClone(this.state);
  }

  async peek(): Promise<Readonly<State>> {
    return this.state;
  }

  /** Nothing to catch up on: every instance reads the one shared state. */
  async catchUp(): Promise<boolean> {
    return false;
  }

  async revision(): Promise<string> {
    return String(this.project.revisions);
  }

  mutate<T>(fn: (draft: State) => MutateOutcome<T>): Promise<T> {
    // One mutation at a time, in call order: the in-memory counterpart of the file lock.
    const p = this.project;
    const run = p.tail.then(() => {
      const draft = structuredClone(p.state);
      const tracked = track(draft);
      const out = fn(tracked.root);
      const result = detach(out.result);
      if (!out.changed) return result;
      let ops = tracked.ops();
      if (out.ops) {
        if (ops.length)
          throw new Error('a mutation both wrote through its draft and planned operations; nothing was written');
        applyOps(draft, out.ops);
        ops = [...out.ops];
      }
      const checked = checkOps(draft, ops, true);
      if (checked.problem)
        throw new Error(`refusing to save an invalid state (${checked.problem}); nothing was written`);
      for (const e of out.history ?? [])
        this.logs.set(e.channel_id, [...(this.logs.get(e.channel_id) ?? []), structuredClone(detach(e))]);
      if (out.archive) this.saved.set(out.archive.channel_id, structuredClone(detach(out.archive)));
      p.state = draft;
      p.revisions++;
      if (out.deleteArchive) this.saved.delete(out.deleteArchive);
      for (const id of out.deleteHistory ?? []) this.logs.delete(id);
      const archives = out.archive !== undefined || out.deleteArchive !== undefined;
      for (const w of p.subscribers) w.tell({ archives });
      return result;
    });
    p.tail = run.catch(() => {});
    return run;
  }

  async subscribe(
    onChange: (change: StoreChange) => Promise<void>,
    log: (line: string) => void = () => {},
  ): Promise<Subscription> {
    const w = new Subscriber(onChange, log);
    this.project.subscribers.add(w);
    this.mine.add(w);
    return {
      close: async () => {
        this.project.subscribers.delete(w);
        this.mine.delete(w);
      },
    };
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
    const hit = log
      .slice(-maxScan)
      .reverse()
      .find((e) => e.message_id === messageId);
    return hit ? structuredClone(hit) : null;
  }

  async archive(id: string): Promise<Archive | null> {
    const a = this.saved.get(id);
    return a ? structuredClone(a) : null;
  }

  async archiveByName(name: string): Promise<Archive | null> {
    return archiveNamed((await this.archives()).archives, name) ?? null;
  }

  async archives(): Promise<{ archives: Archive[]; invalid: InvalidFile[] }> {
    const archives = [...this.saved.values()].map((a) => structuredClone(a)).sort((a, b) => b.saved_at - a.saved_at);
    return { archives, invalid: [] };
  }

  async close(): Promise<void> {
    for (const w of this.mine) this.project.subscribers.delete(w);
    this.mine.clear();
  }
}
