// The Store contract: one suite every implementation passes (memory, file, PostgreSQL). `project`
// makes a fresh project per test and opens instances on it; two instances on one project stand
// for two processes sharing it. Where implementations once differed, this suite is the rule:
// what is written is checked (an invalid state is refused by every store), a mutation that both
// writes through its draft and plans operations is refused, `read` and a mutation's result are
// private copies, and an old `peek` is not promised to stay unchanged.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Archive } from '../../../src/protocol/archive.ts';
import { RefusalError, refuse } from '../../../src/protocol/result.ts';
import { emptyState, type Envelope, type State } from '../../../src/protocol/schema.ts';
import type { MutateOutcome, Store, StoreChange } from '../../../src/store/types.ts';

export interface ContractProject {
  /** A new instance on this test's project. */
  open(): Promise<Store>;
  cleanup(): Promise<void>;
}

const note = (message: string) => ({ at: 1, message });
const append =
  (message: string) =>
  (d: State): MutateOutcome<number> => {
    d.errors.push(note(message));
    return { changed: true, result: d.errors.length };
  };
const messagesOf = (s: Readonly<State>) => s.errors.map((e) => e.message);

const envelope = (channel: string, id: string, content = `text of ${id}`): Envelope =>
  ({
    message_id: id,
    channel_id: channel,
    sender_session_id: 'sess_a',
    sender_role: 'A',
    recipient_session_id: 'sess_b',
    recipient_role: 'B',
    timestamp: 1,
    message_type: 'manual',
    content,
    reply_to: null,
    hop_count: 0,
    correlation_id: '',
    root_message_id: null,
    delivery_status: 'delivered',
    delivered_at: 2,
    attempts: 1,
    delivery_method: 'pull',
    in_flight_by: null,
    in_flight_at: null,
    transitions: [],
  }) as Envelope;

const archiveOf = (id: string, name: string, savedAt: number): Archive =>
  ({
    schema: 1,
    channel_id: id,
    name,
    parent_channel_id: null,
    description: null,
    summary: 's',
    members: [],
    budgets: { max_runtime_ms: null, max_delivered_messages: null },
    created_at: 1,
    saved_at: savedAt,
    saved_by: null,
    saved_by_role: null,
    message_count: 0,
    messages: [],
    final_state_note: 'n',
  }) as Archive;

/** Resolves when `cond` holds, polling; fails after `ms`. */
async function until(cond: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function storeContract(name: string, makeProject: () => Promise<ContractProject>) {
  describe(`Store contract: ${name}`, () => {
    let project: ContractProject;
    const opened: Store[] = [];
    const open = async () => {
      const s = await project.open();
      opened.push(s);
      return s;
    };
    let a: Store;
    beforeEach(async () => {
      project = await makeProject();
      a = await open();
    });
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await project.cleanup();
    });

    describe('read, peek, revision', () => {
      it('an empty project reads as the empty state', async () => {
        expect(await a.read()).toEqual(emptyState());
        expect(await a.peek()).toEqual(emptyState());
      });

      it('read is a private copy; peek shows the state after a mutation', async () => {
        await a.mutate(append('one'));
        const mine = await a.read();
        mine.errors.push(note('not written'));
        expect(messagesOf(await a.read())).toEqual(['one']);
        await a.mutate(append('two'));
        expect(messagesOf(await a.peek())).toEqual(['one', 'two']);
      });

      it('the revision changes with every committed change and only then', async () => {
        const r0 = await a.revision();
        await a.mutate(() => ({ changed: false, result: null }));
        expect(await a.revision()).toBe(r0);
        await a.mutate(append('one'));
        const r1 = await a.revision();
        expect(r1).not.toBe(r0);
        await a.mutate(append('two'));
        expect(await a.revision()).not.toBe(r1);
      });
    });

    describe('mutate', () => {
      it('an unchanged outcome writes nothing, even what the draft was given', async () => {
        const result = await a.mutate((d) => {
          d.errors.push(note('dropped'));
          return { changed: false, result: 'answer' };
        });
        expect(result).toBe('answer');
        expect((await a.read()).errors).toEqual([]);
      });

      it('a refusal rolls back the draft and reaches the caller as thrown', async () => {
        await a.mutate(append('kept'));
        const err = await a
          .mutate((d) => {
            d.errors.push(note('dropped'));
            throw new RefusalError(refuse('state_busy', 'busy'));
          })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RefusalError);
        expect(messagesOf(await a.read())).toEqual(['kept']);
        expect(messagesOf(await (await open()).read())).toEqual(['kept']);
      });

      it('a throw rolls back the draft, and the next mutation works', async () => {
        await expect(
          a.mutate((d) => {
            d.errors.push(note('dropped'));
            throw new Error('boom');
          }),
        ).rejects.toThrow('boom');
        await a.mutate(append('after'));
        expect(messagesOf(await a.read())).toEqual(['after']);
      });

      it('an invalid state is refused and nothing is written', async () => {
        await expect(
          a.mutate((d) => {
            (d.queues as Record<string, unknown>).sess_x = 5;
            return { changed: true, result: null };
          }),
        ).rejects.toThrow(/invalid state/);
        expect(await a.read()).toEqual(emptyState());
        expect(await (await open()).read()).toEqual(emptyState());
      });

      it('planned operations are applied and checked; mixing them with draft writes is refused', async () => {
        await a.mutate(() => ({ changed: true, result: null, ops: [['a', ['errors'], [note('planned')]]] }));
        expect(messagesOf(await a.read())).toEqual(['planned']);
        await expect(
          a.mutate((d) => {
            d.errors.push(note('stray'));
            return { changed: true, result: null, ops: [['a', ['errors'], [note('planned again')]]] };
          }),
        ).rejects.toThrow(/both wrote/);
        await expect(
          a.mutate(() => ({ changed: true, result: null, ops: [['s', ['queues', 'sess_x'], 7]] })),
        ).rejects.toThrow(/invalid state/);
        expect(messagesOf(await a.read())).toEqual(['planned']);
      });

      it('the result is a private copy, not a piece of the state', async () => {
        const got = await a.mutate((d) => {
          d.errors.push(note('one'));
          return { changed: true, result: d.errors };
        });
        got.push(note('not written'));
        expect(messagesOf(await a.read())).toEqual(['one']);
      });

      it('mutations of one instance run one at a time in call order', async () => {
        await Promise.all(Array.from({ length: 20 }, (_, i) => a.mutate(append(`m${i}`))));
        expect(messagesOf(await a.read())).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
      });
    });

    describe('history and archives', () => {
      it('history is kept per channel, newest first; ids and a lookup by id; deleted with its channel', async () => {
        await a.mutate(() => ({
          changed: true,
          result: null,
          ops: [['a', ['errors'], [note('x')]]],
          history: [envelope('chn_a', 'm1'), envelope('chn_a', 'm2'), envelope('chn_b', 'm3')],
        }));
        const b = await open();
        expect((await b.history('chn_a', 10)).map((e) => e.message_id)).toEqual(['m2', 'm1']);
        expect((await b.history('chn_a', 1)).map((e) => e.message_id)).toEqual(['m2']);
        expect([...(await b.historyIds('chn_a'))].sort()).toEqual(['m1', 'm2']);
        expect((await b.findInHistory('chn_a', 'm1', 10))?.content).toBe('text of m1');
        expect(await b.findInHistory('chn_a', 'm1', 1)).toBeNull();
        expect(await b.findInHistory('chn_a', 'm3', 10)).toBeNull();
        await a.mutate(append('delete')).then(() =>
          a.mutate((d) => {
            d.errors.push(note('y'));
            return { changed: true, result: null, deleteHistory: ['chn_a'] };
          }),
        );
        expect(await b.history('chn_a', 10)).toEqual([]);
        expect((await b.history('chn_b', 10)).map((e) => e.message_id)).toEqual(['m3']);
      });

      it('a throw writes no history and no archive', async () => {
        await expect(
          a.mutate(() => {
            throw new Error('boom');
          }),
        ).rejects.toThrow('boom');
        await a.mutate(() => ({
          changed: false,
          result: null,
          history: [envelope('chn_a', 'm1')],
          archive: archiveOf('chn_a', 'alpha', 1),
        }));
        expect(await a.history('chn_a', 10)).toEqual([]);
        expect(await a.archive('chn_a')).toBeNull();
      });

      it('archives: by id, by name case-insensitively (newest), all newest first; a bad id is null; deleted', async () => {
        await a.mutate((d) => {
          d.errors.push(note('1'));
          return { changed: true, result: null, archive: archiveOf('chn_old', 'alpha', 1) };
        });
        await a.mutate((d) => {
          d.errors.push(note('2'));
          return { changed: true, result: null, archive: archiveOf('chn_new', 'alpha', 2) };
        });
        const b = await open();
        expect((await b.archive('chn_old'))?.saved_at).toBe(1);
        expect(await b.archive('../etc/passwd')).toBeNull();
        expect(await b.archive('chn_missing')).toBeNull();
        expect((await b.archiveByName('ALPHA'))?.channel_id).toBe('chn_new');
        expect((await b.archives()).archives.map((x) => x.channel_id)).toEqual(['chn_new', 'chn_old']);
        await a.mutate((d) => {
          d.errors.push(note('3'));
          return { changed: true, result: null, deleteArchive: 'chn_new' };
        });
        expect((await b.archiveByName('alpha'))?.channel_id).toBe('chn_old');
        expect(await b.archive('chn_new')).toBeNull();
      });
    });

    describe('two instances on one project', () => {
      it('each sees the other’s mutations, in order', async () => {
        const b = await open();
        for (let i = 0; i < 5; i++) {
          await a.mutate(append(`a${i}`));
          expect(messagesOf(await b.peek()).at(-1)).toBe(`a${i}`);
          await b.mutate(append(`b${i}`));
          expect(messagesOf(await a.read()).at(-1)).toBe(`b${i}`);
        }
        expect(messagesOf(await a.read())).toEqual(messagesOf(await b.read()));
        expect(messagesOf(await a.read())).toHaveLength(10);
      });

      it('an answer that writes nothing is computed on the newest state, not on what the instance last saw', async () => {
        const b = await open();
        await b.peek();
        await a.mutate(append('from a'));
        const seen = await b.mutate((d) => ({ changed: false, result: messagesOf(d) }));
        expect(seen).toEqual(['from a']);
      });

      it('concurrent mutators lose no write and keep each one’s order', async () => {
        const writers = [a, await open(), await open()];
        const per = 15;
        await Promise.all(
          writers.map((w, k) => Promise.all(Array.from({ length: per }, (_, i) => w.mutate(append(`w${k}-${i}`))))),
        );
        const all = messagesOf(await (await open()).read());
        expect(all).toHaveLength(writers.length * per);
        for (let k = 0; k < writers.length; k++)
          expect(all.filter((m) => m.startsWith(`w${k}-`))).toEqual(
            Array.from({ length: per }, (_, i) => `w${k}-${i}`),
          );
        for (const w of writers) expect(messagesOf(await w.read())).toEqual(all);
      });

      it('catchUp resolves and the next peek is current', async () => {
        const b = await open();
        await b.peek();
        await a.mutate(append('news'));
        await b.catchUp();
        expect(messagesOf(await b.peek())).toEqual(['news']);
      });

      it('a closed instance leaves the project to a new one as it was', async () => {
        await a.mutate(append('kept'));
        await a.close();
        expect(messagesOf(await (await open()).read())).toEqual(['kept']);
      });
    });

    describe('subscribe', () => {
      it('fires for another instance’s change, says when archives changed, and stops when closed', async () => {
        const b = await open();
        const seen: StoreChange[] = [];
        const w = await b.subscribe(
          async (c) => void seen.push(c),
          () => {},
        );
        const before = seen.length;
        await a.mutate(append('one'));
        await until(() => seen.length > before);
        await a.mutate((d) => {
          d.errors.push(note('2'));
          return { changed: true, result: null, archive: archiveOf('chn_a', 'alpha', 1) };
        });
        await until(() => seen.some((c) => c.archives));
        await w.close();
        const after = seen.length;
        await a.mutate(append('three'));
        await new Promise((r) => setTimeout(r, 300));
        expect(seen.length).toBe(after);
      });

      it('never runs its callback concurrently with itself', async () => {
        const b = await open();
        let running = 0;
        let most = 0;
        let calls = 0;
        const w = await b.subscribe(
          async () => {
            running++;
            most = Math.max(most, running);
            calls++;
            await new Promise((r) => setTimeout(r, 30));
            running--;
          },
          () => {},
        );
        for (let i = 0; i < 8; i++) await a.mutate(append(`m${i}`));
        await until(() => calls > 0 && running === 0);
        await new Promise((r) => setTimeout(r, 200));
        await w.close();
        expect(most).toBe(1);
      });
    });
  });
}
