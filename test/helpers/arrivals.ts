// Things that arrive over time (SSE events, subscriber calls) and a wait for the first one that matches,
// whether it has arrived already or is still to come.
export class Arrivals<T> {
  readonly items: T[] = [];
  private readonly waiters = new Set<() => void>();

  constructor(private readonly what: string) {}

  push(item: T): void {
    this.items.push(item);
    for (const w of [...this.waiters]) w();
  }

  /** The first item from index `from` on that matches; rejects after `ms` naming what it saw. */
  next(pred: (item: T) => boolean, ms: number, from = 0): Promise<T> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`no matching ${this.what} in ${ms} ms; got ${JSON.stringify(this.items)}`));
      }, ms);
      const check = () => {
        const hit = this.items.slice(from).find(pred);
        if (hit === undefined) return;
        clearTimeout(t);
        this.waiters.delete(check);
        resolve(hit);
      };
      this.waiters.add(check);
      check();
    });
  }
}
