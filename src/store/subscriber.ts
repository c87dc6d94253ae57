// A subscription callback of a store without files (memory, PostgreSQL), never run concurrently with
// itself as the Store interface promises: news during a run is kept and delivered, merged, right
// after it.
import type { StoreChange } from './types.ts';

export class Subscriber {
  private running = false;
  private pending: StoreChange | null = null;

  constructor(
    private readonly onChange: (change: StoreChange) => Promise<void>,
    private readonly log: (line: string) => void,
  ) {}

  tell(change: StoreChange) {
    this.pending = { archives: (this.pending?.archives ?? false) || change.archives };
    if (!this.running) void this.drain();
  }

  private async drain() {
    this.running = true;
    while (this.pending) {
      const change = this.pending;
      this.pending = null;
      try {
        await this.onChange(change);
      } catch (e) {
        this.log(`subscriber callback failed: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    this.running = false;
  }
}
