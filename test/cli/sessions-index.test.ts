// The CLI's channel reads (`channel list`, `channel get`, `channels`, `members`) answer a fresh
// process from the sessions index (`.opencomms/sessions.json`) and the journal lines appended
// since, not from a whole-state load, and give exactly the answer a whole-state read gives:
// after writes, after compactions, and after a crash that left the index stale, torn or missing.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFile, mkdtemp, readdir, readFile, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Command } from '../../src/engine/index.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { FileStore, resolvePaths } from '../../src/store/index.ts';
import { storeStats } from '../../src/store/file/state-file.ts';
import { CHANNEL, pair, proc } from '../helpers/mail.ts';
import { cli, IDS, liveProject } from './fixtures.ts';

let dir: string;
let writer: Runtime;
/** The writer's clock: a minute per six rounds keeps the sends within the channel's rate. */
let clock = 0;
let sent = 0;
const writerOn = (store: FileStore) => new Runtime(store, { log: () => {}, now: () => clock });
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-sessions-index-'));
  await liveProject(dir);
  // A small journal: the writes below compact often, each compaction sealing the journal before it.
  clock = Date.now();
  writer = writerOn(new FileStore(dir, { compactBytes: 4096 }));
});
afterEach(async () => {
  await writer.close();
  await rm(dir, { recursive: true, force: true });
});

const indexFile = () => join(resolvePaths(dir).dir, 'sessions.json');
const READS: Array<[string[], Command]> = [
  [['channel', 'list'], { op: 'session_list' }],
  [['channels'], { op: 'session_list' }],
  [['channel', 'get', 'team'], { op: 'session_get', args: { channel: 'team' } }],
  [['channel', 'get', 'old'], { op: 'session_get', args: { channel: 'old' } }],
  [['members', 'team'], { op: 'session_get', args: { channel: 'team' } }],
];

/** Every read as the CLI answers it equals the answer from the whole state, loaded and validated. */
async function expectSameAsFullLoad(reads = READS) {
  const full = new Runtime(new FileStore(dir, { fastPath: false }), { log: () => {} });
  try {
    for (const [argv, cmd] of reads) {
      const want = JSON.parse(JSON.stringify(await full.run(cmd)));
      const got = (await cli(...argv, '--project', dir, '--json')).json();
      if (argv[0] === 'channels' || argv[0] === 'members') expect(got.ok).toBe(want.ok);
      else expect(got).toEqual(want);
    }
  } finally {
    await full.close();
  }
}

/** state.json parses and journal lines the store replayed while `fn` ran. */
async function loads(fn: () => Promise<unknown>): Promise<number> {
  const before = storeStats.parses + storeStats.linesApplied;
  await fn();
  return storeStats.parses + storeStats.linesApplied - before;
}
const list = () => cli('channel', 'list', '--project', dir, '--json');

const must = async (p: Promise<{ ok: boolean; message: string }>) => {
  const r = await p;
  if (!r.ok) throw new Error(r.message);
};

/** A round of the changes session reads show: mail queued, handed over and in flight, a member gone
 *  stale and back, a session paused. */
async function busyRound(i: number) {
  clock += 10_000;
  // Paused from round 6k+2 to 6k+3: that round sends nothing.
  if (i % 6 !== 3)
    await must(
      writer.run({ op: 'send', sid: IDS.lead, args: { channel: 'team', content: `m${sent++}`, to: 'Reviewer' } }),
    );
  if (i % 3 === 1) await must(writer.run({ op: 'pull', sid: IDS.reviewer, args: { limit: 2 } }));
  if (i % 4 === 2)
    await writer.store.mutate((d) => {
      const id = d.queues[IDS.reviewer]?.[0];
      if (id) d.messages[id]!.delivery_status = 'in_flight';
      const m = d.channels.team!.members.find((x) => x.session_id === IDS.spawner)!;
      m.stale = !m.stale;
      return { changed: true, result: null };
    });
  if (i % 6 === 2) await must(writer.run({ op: 'pause', sid: { operator: true }, args: { channel: 'team' } }));
  if (i % 6 === 3) await must(writer.run({ op: 'resume', sid: { operator: true }, args: { channel: 'team' } }));
}

describe('the sessions index', () => {
  it('answers as the whole state does, and a fresh read with an index loads no state', async () => {
    await expectSameAsFullLoad(); // no index yet: loaded whole, and the index written
    expect(await readFile(indexFile(), 'utf8')).toContain('"channels"');
    expect(await loads(list)).toBe(0);

    for (let i = 0; i < 24; i++) {
      await busyRound(i);
      if (i % 6 === 5) await expectSameAsFullLoad();
    }
    // Through those rounds the journal was compacted several times, and the reads followed the seals.
    expect(await loads(list)).toBe(0);

    // A compaction keeps only the journal it seals. Whether the index names that journal at this
    // point depends on where the compactions above fell among the full loads, that is on the
    // bytes each write appends (a member's `worktree` moved it), so both cases are made here.
    // The index at the journal's end (a full load wrote it): the compaction's seal leads the read on.
    await unlink(indexFile());
    await list();
    await (writer.store as FileStore).compact();
    expect(await loads(list)).toBe(0);
    await expectSameAsFullLoad();
    // The index one seal behind (a read that follows a seal leaves it as it was): the next
    // compaction removes the journal it names, so a read loads in full, once, and writes it again.
    await (writer.store as FileStore).compact();
    expect(await loads(list)).toBe(1); // state.json parsed; the new journal holds nothing yet
    expect(await loads(list)).toBe(0);
    await expectSameAsFullLoad();
  });

  it('an index left stale, torn or missing by a crash is never trusted over the state', async () => {
    await expectSameAsFullLoad();
    const old = `${indexFile()}.old`;
    await copyFile(indexFile(), old);
    for (let i = 0; i < 12; i++) await busyRound(i);
    await (writer.store as FileStore).compact();
    await (writer.store as FileStore).compact(); // the index's journal is gone for good
    expect((await readdir(resolvePaths(dir).journal)).length).toBeLessThanOrEqual(2);

    // The index of an older snapshot, as a crash before its rewrite would leave it.
    await copyFile(old, indexFile());
    await expectSameAsFullLoad();
    expect(await readFile(indexFile(), 'utf8')).not.toBe(await readFile(old, 'utf8')); // rewritten
    expect(await loads(list)).toBe(0);

    // Torn, deleted, or naming this snapshot while the journal was cut under it.
    const text = await readFile(indexFile(), 'utf8');
    await writeFile(indexFile(), text.slice(0, text.length / 2));
    await expectSameAsFullLoad();
    await unlink(indexFile());
    await expectSameAsFullLoad();
    await busyRound(0);
    await list(); // the index now stands at the journal's end
    await writer.close();
    writer = writerOn(new FileStore(dir));
    const journal = resolvePaths(dir).journal;
    const [file] = (await readdir(journal)).filter((n) => /^[0-9a-f]{16}\.jsonl$/.test(n));
    await truncate(join(journal, file!), 10);
    await expectSameAsFullLoad();
  });

  it('a read writes the index again only when it applied 256 KiB or more of journal past it', async () => {
    await list();
    await writer.close();
    writer = writerOn(new FileStore(dir)); // no compaction for a MiB of journal
    const send = async (content: string) => {
      clock += 10_000;
      await must(writer.run({ op: 'send', sid: IDS.lead, args: { channel: 'team', content, to: 'Reviewer' } }));
    };
    const before = await readFile(indexFile());
    await send('a short one');
    await list();
    expect((await readFile(indexFile())).equals(before)).toBe(true);
    for (let i = 0; i < 40; i++) await send(`${i} ${'x'.repeat(8000)}`);
    await list();
    expect((await readFile(indexFile())).equals(before)).toBe(false);
    expect(await loads(list)).toBe(0);
    await expectSameAsFullLoad();
  });

  it('reads racing a writer process and compactions all answer, and the last equals a full load', async () => {
    const p = proc(dir);
    await pair(p);
    await p.close();
    await list(); // the index, before the writer starts
    // The sends run in a process of their own, as in production (no VITEST re-read of every write).
    const env = { ...process.env };
    delete env.VITEST;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '..', 'helpers', 'send-worker.ts'), dir, '0', '150'],
      { env, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (b) => void (out += b));
    const exited = once(child, 'exit');
    let running = true;
    void exited.then(() => void (running = false));
    const compactor = new FileStore(dir);
    let reads = 0;
    try {
      while (running) {
        const r = (await list()).json();
        expect(r.ok).toBe(true);
        expect(r.data.live.map((c: { name: string }) => c.name)).toContain(CHANNEL);
        if (++reads % 4 === 0) await compactor.compact();
      }
    } finally {
      await compactor.close();
    }
    await exited;
    const answers = JSON.parse(out.trim().split('\n').at(-1)!) as Array<{ ok: boolean }>;
    expect(answers.filter((a) => a.ok)).toHaveLength(150);
    expect(reads).toBeGreaterThan(1);
    const get: [string[], Command] = [['channel', 'get', CHANNEL], { op: 'session_get', args: { channel: CHANNEL } }];
    await expectSameAsFullLoad([READS[0]!, get]);
  }, 120_000);
});
