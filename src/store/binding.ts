// Which store holds a project: the files under `.opencomms/` (the default, no binding), or a
// PostgreSQL project recorded by `opencomms store init` in `.opencomms/store.json` as a URL and a
// project key, never a secret (a URL with a password is refused: passwords come from the
// environment, ~/.pgpass or PGPASSFILE). Every entry point opens its store through `openStore`.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { RefusalError, refuse } from '../protocol/result.ts';
import { ensureDir, resolvePaths } from './paths.ts';
import { clientConfig, describeUrl, urlHasPassword } from './postgres/connect.ts';
import { schemaOf } from './postgres/schema.ts';
import { PgStore } from './postgres/store.ts';
import { FileStore } from './file/store.ts';
import type { Store } from './types.ts';

export type Binding = { kind: 'file' } | { kind: 'postgres'; url: string; key: string };

/** The project's binding; a file that is there but not a binding is refused, never ignored (the
 *  project would silently fall back to another store). */
export function readBinding(projectDir: string): Binding {
  const file = resolvePaths(projectDir).binding;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'file' };
    if ((e as NodeJS.ErrnoException).code === 'ENOTDIR')
      throw new RefusalError(
        refuse(
          'state_unreadable',
          `${resolvePaths(projectDir).dir} is not a directory; OpenComms keeps its state, pins and bundles there. Move that file away, then run the command again. Nothing was written.`,
          { code: 'ENOTDIR' },
        ),
      );
    throw new RefusalError(
      refuse(
        'config_malformed',
        `.opencomms/store.json cannot be read (${(e as NodeJS.ErrnoException).code}): fix its permissions.`,
      ),
    );
  }
  let b: { kind?: unknown; url?: unknown; key?: unknown };
  try {
    b = JSON.parse(text) as typeof b;
  } catch {
    b = {};
  }
  if (b.kind === 'postgres' && typeof b.url === 'string' && typeof b.key === 'string' && !urlHasPassword(b.url))
    return { kind: 'postgres', url: b.url, key: b.key };
  throw new RefusalError(
    refuse(
      'config_malformed',
      '.opencomms/store.json is not a store binding: run `opencomms store init <url> --key <project-key>` again, or delete it to use the files.',
    ),
  );
}

/** Records a PostgreSQL binding after checking it could be used (URL, key, authentication rule). */
export async function writeBinding(projectDir: string, url: string, key: string): Promise<Binding> {
  if (urlHasPassword(url))
    throw new RefusalError(
      refuse(
        'invalid_argument',
        `The URL for ${describeUrl(url)} contains a password, which would be written into .opencomms/: remove it and put the password in PGPASSWORD, ~/.pgpass or a 0600 file named by PGPASSFILE.`,
      ),
    );
  schemaOf(key);
  clientConfig(url);
  const paths = resolvePaths(projectDir);
  await ensureDir(paths);
  const binding: Binding = { kind: 'postgres', url, key };
  await writeFile(paths.binding, `${JSON.stringify(binding, null, 2)}\n`);
  return binding;
}

/** The store of a project as its binding says. A binding that cannot be used (malformed, a URL
 *  the authentication rule forbids) gives a store whose every call answers that refusal, so that
 *  each entry point reports it as it reports any refusal. */
export function openStore(projectDir: string): Store {
  try {
    const b = readBinding(projectDir);
    return b.kind === 'postgres' ? new PgStore({ url: b.url, key: b.key }) : new FileStore(projectDir);
  } catch (e) {
    if (e instanceof RefusalError) return refusingStore(projectDir, e);
    throw e;
  }
}

function refusingStore(location: string, e: RefusalError): Store {
  const no = () => Promise.reject(e);
  return {
    location,
    read: no,
    peek: no,
    catchUp: no,
    revision: no,
    mutate: no,
    subscribe: no,
    history: no,
    historyIds: no,
    findInHistory: no,
    archive: no,
    archiveByName: no,
    archives: no,
    close: async () => {},
  };
}
