// Leases: how a process on one machine tells the others it is still there. Each long-lived process
// renews a row (its process tag, its machine, an expiry) on the database's clock, so no machine's
// clock is trusted; a tag with no row, or an expired one, is a process that is gone. One statement
// renews this process's lease and reads everyone's, so a renewal is one query.
import type pg from 'pg';
import type { LeaseStore, LeaseView } from '../types.ts';
import { PG_LEASE_KEEP_EXPIRED_MS } from './limits-machines.ts';
import { ident } from './schema.ts';

type Query = <R extends pg.QueryResultRow>(q: pg.QueryConfig) => Promise<pg.QueryResult<R>>;

interface Row {
  tag: string;
  machine: string;
  left_ms: number;
}

export class PgLeases implements LeaseStore {
  private ready: Promise<unknown> | null = null;

  constructor(
    private readonly query: Query,
    private readonly schema: string,
    /** The project's head as each renewal read it: the store's backstop needs no query of its own. */
    private readonly onHead: (seq: number) => void = () => {},
  ) {}

  /** The table, created on first use (beside the layout: a project laid out before leases works). */
  private table(): Promise<unknown> {
    const s = ident(this.schema);
    this.ready ??= this.query({
      text: `create table if not exists ${s}.leases (tag text primary key, machine text not null, expires_at timestamptz not null)`,
    }).catch((e: unknown) => {
      this.ready = null;
      throw e;
    });
    return this.ready;
  }

  async renew(tag: string, machine: string, ms: number): Promise<LeaseView> {
    await this.table();
    const s = ident(this.schema);
    // Rows modified in a WITH are not visible to the outer select: this process's lease is added
    // to the answer as renewed. Leases expired long ago go (no row means gone, as expired does).
    const r = await this.query<Row>({
      name: `${this.schema}.lease_renew`,
      text: `with renewed as (
          insert into ${s}.leases (tag, machine, expires_at) values ($1, $2, now() + $3 * interval '1 millisecond')
          on conflict (tag) do update set machine = excluded.machine, expires_at = excluded.expires_at returning tag),
        gone as (delete from ${s}.leases where expires_at < now() - $4 * interval '1 millisecond' and tag <> $1)
        select tag, machine, (extract(epoch from (expires_at - now())) * 1000)::float8 as left_ms, (select seq from ${s}.head) as head from ${s}.leases where tag <> $1
        union all select $1, $2, $3::float8, (select seq from ${s}.head)`,
      values: [tag, machine, ms, PG_LEASE_KEEP_EXPIRED_MS],
    });
    const head = (r.rows as (Row & { head: string | null })[]).at(-1)?.head;
    if (head != null) this.onHead(Number(head));
    return view(r.rows);
  }

  async snapshot(): Promise<LeaseView> {
    await this.table();
    const s = ident(this.schema);
    const r = await this.query<Row>({
      name: `${this.schema}.lease_snapshot`,
      text: `select tag, machine, (extract(epoch from (expires_at - now())) * 1000)::float8 as left_ms from ${s}.leases`,
    });
    return view(r.rows);
  }

  async release(tag: string): Promise<void> {
    await this.table();
    await this.query({ text: `delete from ${ident(this.schema)}.leases where tag = $1`, values: [tag] });
  }
}

function view(rows: Row[]): LeaseView {
  const left = new Map(rows.map((r) => [r.tag, Number(r.left_ms)]));
  return {
    live: new Set(rows.filter((r) => Number(r.left_ms) > 0).map((r) => r.tag)),
    left,
  };
}
