// Doctor's look at a project bound to PostgreSQL: the server, the project key, the head and what a
// cold start replays, and the state as the store loads it (the file checks see no state there).
import { RefusalError } from '../protocol/result.ts';
import { readBinding } from '../store/binding.ts';
import { PgStore } from '../store/postgres/store.ts';
import { row, type Row, type StateLoad } from './files.ts';

/** null: the project is on the file store, whose own checks apply. */
export async function boundStore(project: string): Promise<{ rows: Row[]; load: StateLoad } | null> {
  let binding;
  try {
    binding = readBinding(project);
  } catch (e) {
    const r = (e as RefusalError).refusal;
    return {
      rows: [row('FAIL', 'store', r.message)],
      load: { kind: 'refused', reason: String(r.data?.reason), message: r.message },
    };
  }
  if (binding.kind === 'file') return null;
  let store: PgStore | null = null;
  try {
    store = new PgStore({ url: binding.url, key: binding.key });
    const s = await store.status();
    const state = await store.read();
    return {
      rows: [
        row(
          'OK',
          'store',
          `PostgreSQL ${s.server_version} at ${store.location}: head ${s.head}, a cold start replays ${s.cold_start_changes} change(s)`,
        ),
      ],
      load: { kind: 'ok', state, journal: { id: null, entries: 0, bytes: 0 } },
    };
  } catch (e) {
    if (!(e instanceof RefusalError)) throw e;
    return {
      rows: [row('FAIL', 'store', e.refusal.message)],
      load: { kind: 'refused', reason: String(e.refusal.data?.reason), message: e.refusal.message },
    };
  } finally {
    await store?.close();
  }
}
