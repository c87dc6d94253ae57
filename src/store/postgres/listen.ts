// The listening connection of a PostgreSQL store: LISTEN on the project's channel, whose
// notifications carry the new sequence number and the change's channel (`*`: any; then ` a` when
// archives changed), never message text. Subscribers are told of the changes of the channels in this
// process's focus, of no one channel, and of archives. A notification is a hint: one sent while this connection is down is lost, so after every
// (re)connection each subscriber is told to look again, and a backstop query of the head every
// PG_BACKSTOP_MS covers the rest, unless another query read the head meanwhile (`heard`).
import pg from './pg.ts';
import type { StoreChange, Subscription } from '../types.ts';
import { Subscriber } from '../subscriber.ts';
import { PG_BACKSTOP_MS, reconnectDelayMs } from './limits.ts';
import { ident } from './schema.ts';

export class Listener {
  /** The newest sequence number notified since the connection came up. */
  newest = 0;
  /** The newest notified for a change of a channel `concerns` names, or of no one channel: a
   *  process that keeps only some channels current looks again for these only. */
  newestConcerning = 0;
  /** Whether this process keeps the channel current (the store's focus; all until it has one). */
  concerns: (channel: string) => boolean = () => true;
  /** Subscribers are told only of what `concerns` this process (Store.focus). */
  filtering = false;
  /** When LISTEN last took effect (0: not listening now). */
  upSince = 0;
  /** When the head was last read from the server by any query of this process (`heard`). */
  heardAt = 0;
  private client: pg.Client | null = null;
  private starting: Promise<void> | null = null;
  private closed = false;
  private failures = 0;
  private retry: NodeJS.Timeout | null = null;
  private backstop: NodeJS.Timeout | null = null;
  private readonly subscribers = new Set<Subscriber>();

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
  ) {}

  get up(): boolean {
    return this.upSince > 0;
  }

  /** Connects and listens unless it does already or is trying to; resolves when this attempt
   *  ended (listening, or failed and retrying later). */
  start(): Promise<void> {
    if (this.closed || this.client || this.retry) return Promise.resolve();
    this.starting ??= this.connect().finally(() => (this.starting = null));
    return this.starting;
  }

  private async connect() {
    const c = new pg.Client(this.config);
    c.on('error', () => this.lost(c));
    c.on('end', () => this.lost(c));
    c.on('notification', (n) => {
      if (n.channel !== this.channel) return;
      const [seq, channel, archives] = (n.payload ?? '').split(' ');
      const at = Number(seq) || 0;
      this.newest = Math.max(this.newest, at);
      const concerns = !channel || channel === '*' || this.concerns(channel);
      if (concerns) this.newestConcerning = Math.max(this.newestConcerning, at);
      if (concerns || !this.filtering || archives === 'a') this.tellAll({ archives: archives === 'a' });
    });
    try {
      await c.connect();
      await c.query(`listen ${ident(this.channel)}`);
    } catch {
      void c.end().catch(() => {});
      this.again();
      return;
    }
    if (this.closed) return void c.end().catch(() => {});
    this.client = c;
    this.failures = 0;
    this.upSince = Date.now();
    // Whatever was notified while no connection listened is lost: everyone looks again.
    this.tellAll({ archives: true });
  }

  private lost(c: pg.Client) {
    if (this.client !== c) return;
    this.client = null;
    this.upSince = 0;
    void c.end().catch(() => {});
    this.again();
  }

  private again() {
    if (this.closed || this.retry) return;
    const delay = reconnectDelayMs(this.failures++);
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.start();
    }, delay);
    this.retry.unref();
  }

  private tellAll(change: StoreChange) {
    for (const w of this.subscribers) w.tell(change);
  }

  /** Resolves once listening (or trying to: a server down now is retried without end). */
  async subscribe(
    onChange: (change: StoreChange) => Promise<void>,
    log: (line: string) => void,
  ): Promise<Subscription> {
    const w = new Subscriber(onChange, log);
    await this.start();
    this.subscribers.add(w);
    this.backstop ??= setInterval(() => void this.poll(), PG_BACKSTOP_MS);
    this.backstop.unref();
    return {
      close: async () => {
        this.subscribers.delete(w);
        if (!this.subscribers.size && this.backstop) {
          clearInterval(this.backstop);
          this.backstop = null;
        }
      },
    };
  }

  /** The head as another query of this process read it (a lease renewal): a backstop poll then
   *  has nothing to add for PG_BACKSTOP_MS. */
  heard(seq: number) {
    this.heardAt = Date.now();
    if (seq > this.newest) {
      this.newest = seq;
      this.newestConcerning = Math.max(this.newestConcerning, seq);
      this.tellAll({ archives: true });
    }
  }

  /** `q` on the listening connection, which is idle between notifications (a snapshot, 2-3 MB
   *  for a busy project, then does not hold up the mutations queued on the other); null when not
   *  listening now. */
  run(q: pg.QueryConfig): Promise<unknown> | null {
    return this.client?.query(q) ?? null;
  }

  /** The backstop: the head as the server has it, compared with what was notified. */
  private async poll() {
    const c = this.client;
    if (!c || Date.now() - this.heardAt < PG_BACKSTOP_MS) return;
    try {
      const r = await c.query<{ seq: string }>(`select seq from ${ident(this.channel)}.head`);
      const seq = Number(r.rows[0]?.seq ?? 0);
      if (seq > this.newest) {
        this.newest = seq;
        this.newestConcerning = Math.max(this.newestConcerning, seq);
        this.tellAll({ archives: true });
      }
    } catch {
      // a lost connection is handled by its 'error'/'end' events; the next tick tries again
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
    if (this.retry) clearTimeout(this.retry);
    if (this.backstop) clearInterval(this.backstop);
    const c = this.client;
    this.client = null;
    this.upSince = 0;
    await c?.end().catch(() => {});
  }
}
