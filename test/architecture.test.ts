// Architecture rules that a grep can prove: the functional core has no clock, no I/O and no
// timers; it names no host; no code assigns an envelope's status outside the machines; and the store
// interface and the PostgreSQL store import nothing of the file store.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
function files(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((f) => {
    const p = join(dir, f);
    return statSync(join(root, p)).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}
const offenders = (dirs: string[], re: RegExp) =>
  dirs.flatMap(files).flatMap((f) =>
    readFileSync(join(root, f), 'utf8')
      .split('\n')
      .map((line, i) => ({ where: `${relative(root, join(root, f))}:${i + 1}`, line }))
      .filter(({ line }) => !line.trim().startsWith('//') && !line.trim().startsWith('*') && re.test(line)),
  );

describe('functional core', () => {
  const core = ['machines', 'src/engine'];
  it('reads no clock', () => expect(offenders(core, /Date\.now\(|new Date\(\)|performance\.now/)).toEqual([]));
  it('touches no file system', () =>
    expect(offenders(core, /from ['"](node:)?fs(\/promises)?['"]|require\(['"](node:)?fs/)).toEqual([]));
  it('sets no timers', () => expect(offenders(core, /\b(setTimeout|setInterval|setImmediate)\(/)).toEqual([]));
  it('machines declare no delayed transitions', () => expect(offenders(['machines'], /\bafter\s*:/)).toEqual([]));
});

describe('host neutrality', () => {
  it('machines, engine, store and protocol name no host', () =>
    expect(
      offenders(
        ['machines', 'src/engine', 'src/store', 'src/protocol'],
        /parentid|claude|codex|chatgpt|openai|anthropic|\bopencode\b(?!-comms)/i,
      ),
    ).toEqual([]));
});

describe('envelope status', () => {
  it('is never assigned directly: only machine transitions change it', () =>
    expect(offenders(['src', 'adapters'], /\.delivery_status\s*=[^=]|\[['"]delivery_status['"]\]\s*=[^=]/)).toEqual(
      [],
    ));
  it('is written back from a machine record in exactly one place', () => {
    const writers = offenders(['src', 'adapters'], /Object\.assign\(e, r\.record\)/);
    expect(writers.map((w) => w.where.split(':')[0])).toEqual(['src/engine/transitions.ts']);
  });
});

describe('store interface', () => {
  // The interface and the networked store stand without the file store: its compaction, lock files,
  // backups and temp files are its own, so a store that keeps no files carries none of them.
  const fileStoreImport = /from ['"][^'"]*\/file\/[^'"]*['"]|import\(['"][^'"]*\/file\//;
  it('src/store/types.ts imports nothing of the file store', () =>
    expect(offenders(['src/store'], fileStoreImport).filter((o) => o.where.startsWith('src/store/types.ts:'))).toEqual(
      [],
    ));
  it('src/store/postgres/ imports nothing of the file store', () =>
    expect(offenders(['src/store/postgres'], fileStoreImport)).toEqual([]));
  it('the file store lives in src/store/file/', () =>
    expect(files('src/store').filter((f) => /(^|\/)(lock|journal|atomic|state-file)\.ts$/.test(f))).toEqual([
      'src/store/file/atomic.ts',
      'src/store/file/journal.ts',
      'src/store/file/lock.ts',
      'src/store/file/state-file.ts',
    ]));
});
