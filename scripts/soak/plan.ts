// The soak's cast and vocabulary, shared by the harness, its workers and the analysis.

/** Four writers (pull members that also read their mail) and two push members whose owner
 *  processes deliver with a DeliveryDriver. Member ids double as process names. */
export const WRITERS = ['w1', 'w2', 'w3', 'w4'] as const;
export const OWNERS = ['o1', 'o2'] as const;
export const MEMBERS: readonly string[] = [...WRITERS, ...OWNERS];
/** Two channels with every member on both: FIFO is per channel, queues are per recipient. */
export const CHANNELS = ['soak-a', 'soak-b'] as const;

/** Each logical send's content starts with its origin: writer, incarnation, action number. The
 *  store's envelopes name their send this way even when the writer died before recording it. */
export const contentToken = (writer: string, inc: number, seq: number) => `soak ${writer} i${inc} s${seq}`;

export interface Origin {
  writer: string;
  inc: number;
  seq: number;
}

export function parseToken(content: string): Origin | null {
  const m = /^soak (\w+) i(\d+) s(\d+) /.exec(content);
  return m ? { writer: m[1]!, inc: Number(m[2]), seq: Number(m[3]) } : null;
}

/** Send order within one writer: its incarnations run one after another (a restart waits for the
 *  killed process to be gone), and each incarnation's actions are sequential. */
export const sendOrder = (o: Origin) => o.inc * 1e9 + o.seq;

export type Rng = () => number;

/** mulberry32: a small seeded generator, so a run's kill schedule can be replayed from its seed. */
export function rng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Environment variable through which `--compact-bytes` reaches the workers. */
export const SOAK_COMPACT_BYTES = 'OPENCOMMS_SOAK_COMPACT_BYTES';

/** Environment variable through which `--store postgres` reaches the workers: JSON `PgTarget`. */
export const SOAK_PG = 'OPENCOMMS_SOAK_PG';

export interface PgTarget {
  /** The store's URL as this process reaches it (always loopback). */
  url: string;
  key: string;
  /** Inside a machine's namespace: the URL's port is carried to this host and port first. */
  forward?: { host: string; port: number };
}
