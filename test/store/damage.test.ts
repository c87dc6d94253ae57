// The file store under the damage disks and operators do: a full disk, a journal cut under running
// processes, a lost snapshot. The rules (docs/reliability.md, "Damage"): a write that did not reach
// the disk whole is refused and leaves the store as it was; recovery never moves the only copy of
// anything before its replacement is written; a lost snapshot is reported and its journal kept.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
  appendFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RefusalError } from '../../src/protocol/result.ts';
import { storeFs } from '../../src/store/file/fs.ts';
import { glance } from '../../src/store/file/glance.ts';
import { inspectState } from '../../src/store/file/store.ts';
import { tempProject } from '../helpers/store-fixtures.ts';
import { live, pair, proc, pull, send, type Proc } from '../helpers/mail.ts';

let dir: string;
let cleanup: () => Promise<void>;
const procs: Proc[] = [];
const open = (options?: Parameters<typeof proc>[1]) => {
  const p = proc(dir, options);
  procs.push(p);
  return p;
};
beforeEach(async () => {
  ({ dir, cleanup } = await tempProject());
});
afterEach(async () => {
  for (const p of procs.splice(0)) await p.close();
  await cleanup();
});

const storeDir = () => join(dir, '.opencomms');
const stateFile = () => join(storeDir(), 'state.json');
const journalId = () => (JSON.parse(readFileSync(stateFile(), 'utf8')) as { journal_id: string }).journal_id;
const journalFileOf = (id: string) => join(storeDir(), 'journal', `${id}.jsonl`);

/** Everything B can still pull, through a fresh process. */
async function drain(): Promise<string[]> {
  const b = open();
  const got: string[] = [];
  for (;;) {
    const { result, contents } = await pull(b);
    expect(result.ok, result.message).toBe(true);
    if (!contents.length) return got;
    got.push(...contents);
  }
}

const root = process.getuid?.() === 0;

describe('a full disk', () => {
  let mounted = '';
  afterEach(async () => {
    for (const p of procs.splice(0)) await p.close(); // nothing may hold a file there
    if (mounted) execFileSync('umount', ['-l', mounted]); // lazy: a descriptor still closing cannot fail the test
    mounted = '';
  });

  // A real full file system: tmpfs of 3 MB (mounting needs root; elsewhere the fault-injection
  // tests cover the same writes through the store's file-system seam).
  it.skipIf(!root)(
    'every send answered ok is pulled once, every refused one is gone, and the project never rolls back',
    async () => {
      mounted = join(dir, 'small');
      mkdirSync(mounted);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mounted]);
      dir = mounted;
      const a = open();
      await pair(a);
      const acked: string[] = [];
      for (const m of ['one', 'two']) {
        expect((await send(a, m)).ok).toBe(true);
        acked.push(m);
      }
      // Fill the disk, a page at a time, to the last byte.
      const filler = join(mounted, 'filler');
      try {
        for (;;) appendFileSync(filler, Buffer.alloc(4096, 120));
      } catch (e) {
        expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC');
      }
      try {
        for (;;) appendFileSync(filler, 'x');
      } catch {
        // full to the byte
      }
      // The sends run in a process of their own without the test hook that re-reads every write
      // (VERIFY_WRITES), as they would in production.
      const env = { ...process.env };
      delete env.VITEST;
      const out = execFileSync(
        process.execPath,
        ['--import', 'tsx', join(import.meta.dirname, '..', 'helpers', 'send-worker.ts'), dir, '3', '38'],
        { env, encoding: 'utf8' },
      );
      const answers = JSON.parse(out.trim().split('\n').at(-1)!) as Array<{ content: string; ok: boolean }>;
      for (const r of answers) if (r.ok) acked.push(r.content);
      const refused = answers.filter((r) => !r.ok).length;
      expect(refused).toBeGreaterThan(0);
      unlinkSync(filler);
      // A process that was running all along, and a fresh one, see the same project.
      expect((await send(a, 'after')).ok).toBe(true);
      acked.push('after');
      expect(await drain()).toEqual(acked);
      expect(readdirSync(join(storeDir(), 'journal')).filter((f) => f.includes('.corrupt.'))).toEqual([]);
    },
    60_000,
  );
});

describe('recovery of a damaged journal', () => {
  it('keeps the damaged journal under its own name until the snapshot that replaces it is written', async () => {
    const a = open();
    await pair(a);
    for (const m of ['one', 'two']) expect((await send(a, m)).ok).toBe(true);
    const id = journalId();
    // A line out of sequence: real damage, recovered under the lock by the next process.
    appendFileSync(journalFileOf(id), '{"n":99,"ops":[]}\n');
    const failing = open();
    const rename = storeFs.renameSync;
    storeFs.renameSync = () => {
      throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    };
    try {
      expect((await send(failing, 'three')).ok).toBe(false);
    } finally {
      storeFs.renameSync = rename;
    }
    // Nothing moved: state.json still names a journal that is there, and a fresh process loads
    // everything before the damage.
    expect(journalId()).toBe(id);
    expect(existsSync(journalFileOf(id))).toBe(true);
    expect(await live(open())).toEqual(['one', 'two']);
  });
});

describe('a journal cut under running processes', () => {
  it('a line appended after the cut reaches every process, and the cut is recorded', async () => {
    const a = open();
    const b = open();
    await pair(a);
    for (const m of ['one', 'two', 'three']) expect((await send(a, m)).ok).toBe(true);
    expect(await live(b)).toEqual(['one', 'two', 'three']); // B holds the journal's old length
    const file = journalFileOf(journalId());
    truncateSync(file, statSync(file).size - 150);
    expect((await send(open(), 'four')).ok).toBe(true);
    expect((await send(a, 'five')).ok).toBe(true);
    const { contents } = await pull(b);
    expect(contents).toContain('four');
    expect(contents).toContain('five');
    expect(new Set(contents).size).toBe(contents.length);
    const errors = (await open().store.read()).errors;
    expect(errors.some((e) => /cut|shorter|changed/.test(e.message))).toBe(true);
  });
});

describe('a lost journal', () => {
  it('is reported in state.errors and by inspectState, and the snapshot it continued is kept', async () => {
    const a = open();
    await pair(a);
    for (const m of ['one', 'two']) expect((await send(a, m)).ok).toBe(true);
    await a.store.compact(); // one and two are in the snapshot now
    expect((await send(a, 'three')).ok).toBe(true); // a line of the journal only
    unlinkSync(journalFileOf(journalId()));
    expect(await inspectState(dir)).toMatchObject({ kind: 'corrupt', cause: expect.stringMatching(/is gone/) });
    // A running process and a fresh one: the snapshot's state, and the loss recorded once.
    expect((await send(a, 'four')).ok).toBe(true);
    const state = await open().store.read();
    expect(Object.values(state.messages).map((m) => m.content)).toEqual(['one', 'two', 'four']);
    expect(state.errors.filter((e) => e.reason === 'journal_missing')).toHaveLength(1);
    expect((await inspectState(dir)).kind).toBe('ok');
  });
});

describe('a lost snapshot', () => {
  it('is reported and refused, never replaced by an empty state, and its journal is kept', async () => {
    const a = open();
    await pair(a);
    expect((await send(a, 'one')).ok).toBe(true);
    expect((await send(a, 'two')).ok).toBe(true);
    const id = journalId();
    const journal = readFileSync(journalFileOf(id));
    const snapshot = readFileSync(stateFile());
    unlinkSync(stateFile());
    // A fresh process: reads and writes are refused with a reason that says what to do.
    const fresh = open();
    const read = await fresh.store.read().then(
      () => null,
      (e: unknown) => e,
    );
    expect(read).toBeInstanceOf(RefusalError);
    expect((read as RefusalError).refusal.data).toMatchObject({ reason: 'state_unreadable' });
    expect((read as RefusalError).refusal.message).toMatch(/state\.json is missing/);
    const other = await fresh.rt.run({
      op: 'create',
      caller: {
        session_id: 'x',
        host: 'test',
        surface: 'mcp',
        delivery_mode: 'pull',
        host_session_id: null,
        project_id: 'local-project',
        worktree: '/w',
      },
      args: { channel: 'other', role: 'X', role_prompt: 'p' },
    });
    expect(other).toMatchObject({ ok: false, data: { reason: 'state_unreadable' } });
    // The process that was running refuses too, instead of answering from an empty state.
    expect(await send(a, 'three')).toMatchObject({ ok: false, data: { reason: 'state_unreadable' } });
    expect(existsSync(stateFile())).toBe(false);
    expect(readFileSync(journalFileOf(id))).toEqual(journal);
    const inspected = await inspectState(dir);
    expect(inspected.kind).toBe('corrupt');
    expect(glance(dir).kind).toBe('unknown'); // the hook runner's look takes the full path, never 'no mail'
    // Put back, the project is whole again.
    writeFileSync(stateFile(), snapshot);
    expect(await drain()).toEqual(['one', 'two']);
  });
});
