// `opencomms watch` as a real process (beyond FEATURES.md §9): it prints the machine transitions
// other processes cause, as they happen, one line each; a push recipient's owner process takes an
// envelope through in_flight to delivered (which leaves state.json for the history log) and a
// pull member reads another. `--json` prints one object per line; `--channel` filters.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/engine/index.ts';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { WatchLine } from '../../src/cli/watch/diff.ts';
import { BIN, start, type Proc } from '../helpers/process.ts';
import { cli, incompatibleState } from './fixtures.ts';

const worker = join(import.meta.dirname, '..', 'helpers', 'runtime-worker.ts');
let dir: string;
let rt: Runtime;
const procs: Proc[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-watch-'));
  rt = openRuntime(dir);
});
afterEach(async () => {
  await rt.close();
  for (const p of procs.splice(0)) await p.stop('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

const member = (session_id: string, delivery_mode: string): Caller => ({
  session_id,
  host: 'test',
  surface: 'cli',
  delivery_mode,
  host_session_id: session_id,
  project_id: 'local-project',
  worktree: dir,
});
const must = async (p: Promise<{ ok: boolean; message: string; data?: any }>) => {
  const r = await p;
  if (!r.ok) throw new Error(r.message);
  return r;
};
const watch = async (...extra: string[]) => {
  const p = start([BIN, 'watch', '--project', dir, ...extra]);
  procs.push(p);
  await new Promise<void>((resolve) => {
    const t = setInterval(() => {
      if (!p.stderr().includes('Ctrl-C stops')) return;
      clearInterval(t);
      resolve();
    }, 10);
  });
  return p;
};
const json = (l: string) => JSON.parse(l) as WatchLine;
const envelopeLine = (id: string, to: string) => (l: string) => {
  const j = json(l);
  return j.kind === 'envelope' && j.message_id === id && j.to === to;
};

describe('opencomms watch', () => {
  it('prints each transition of another process as it happens, through to terminal states', async () => {
    await must(
      rt.run({
        op: 'create',
        caller: member('sess_lead', 'pull'),
        args: { channel: 'team', role: 'Lead', role_prompt: 'lead' },
      }),
    );
    await must(
      rt.run({
        op: 'join',
        caller: member('sess_push', 'push'),
        args: { channel: 'team', role: 'Pusher', role_prompt: 'p' },
      }),
    );
    await must(
      rt.run({
        op: 'join',
        caller: member('sess_pull', 'pull'),
        args: { channel: 'team', role: 'Reader', role_prompt: 'r' },
      }),
    );
    const w = await watch('--json');
    const text = await watch();

    // The push recipient's owner is another process: it drains (in_flight) and commits (delivered).
    const owner = start(['--import', 'tsx', worker, 'owner', dir, 'sess_push']);
    procs.push(owner);
    await owner.waitFor((l) => l === 'ready');
    const sent = await must(
      rt.run({ op: 'send', sid: 'sess_lead', args: { channel: 'team', content: 'build it', to: 'Pusher' } }),
    );
    const id = sent.data.message_ids[0] as string;
    await w.waitFor(envelopeLine(id, 'delivered'));
    const trail = w.lines.map(json).filter((l) => l.kind === 'envelope' && l.message_id === id);
    expect(trail.map((l) => (l.kind === 'envelope' ? `${l.event}:${l.from}→${l.to}` : ''))).toEqual([
      'SEND:null→pending',
      'DRAIN:pending→in_flight',
      'COMMIT:in_flight→delivered',
    ]);
    expect(trail.map((l) => l.at)).toEqual([...trail.map((l) => l.at)].sort((a, b) => a - b));
    // Its recipient line cools down after the hand-over (a state held for the 1 s cooldown; the
    // few ms of `delivering` may fall between two looks) and is ready again after it.
    await w.waitFor((l) => {
      const j = json(l);
      return j.kind === 'recipient' && j.role === 'Pusher' && j.to === 'cooling';
    });
    await w.waitFor((l) => {
      const j = json(l);
      return j.kind === 'recipient' && j.role === 'Pusher' && j.from === 'cooling' && j.to === 'ready';
    });

    // A pull member: pending (waits for its read) → delivered by PULL, in another process's call.
    const read = await must(
      rt.run({ op: 'send', sid: 'sess_lead', args: { channel: 'team', content: 'read it', to: 'Reader' } }),
    );
    const rid = read.data.message_ids[0] as string;
    await w.waitFor(envelopeLine(rid, 'pending'));
    await w.waitFor((l) => {
      const j = json(l);
      return j.kind === 'recipient' && j.role === 'Reader' && j.to === 'blocked:awaiting_pull';
    });
    await must(rt.run({ op: 'pull', sid: 'sess_pull', args: {} }));
    const pulled = json(await w.waitFor(envelopeLine(rid, 'delivered')));
    expect(pulled).toMatchObject({
      event: 'PULL',
      from: 'pending',
      attempt: 1,
      channel: 'team',
      sender_role: 'Lead',
      recipient_role: 'Reader',
    });

    // The same moves in the text view.
    await text.waitFor((l) => l.includes(`${rid.slice(0, 12)}…  Lead → Reader  pending → delivered (PULL, attempt 1)`));
    expect(text.lines.some((l) => l.includes('pending → in_flight (DRAIN, attempt 1)'))).toBe(true);
    expect(await w.stop('SIGINT')).toBe(0);
    expect(await text.stop('SIGTERM')).toBe(0);
  });

  it('on an empty project: --channel shows one channel only; deleting it shows its mail discarded', async () => {
    // Started before anything exists (no .opencomms/ yet): it sees the channels appear.
    const w = await watch('--channel', 'BETA', '--json');
    for (const ch of ['alpha', 'beta']) {
      await must(
        rt.run({
          op: 'create',
          caller: member(`sess_${ch}1`, 'pull'),
          args: { channel: ch, role: 'A', role_prompt: 'a' },
        }),
      );
      await must(
        rt.run({
          op: 'join',
          caller: member(`sess_${ch}2`, 'pull'),
          args: { channel: ch, role: 'B', role_prompt: 'b' },
        }),
      );
    }
    await must(rt.run({ op: 'send', sid: 'sess_alpha1', args: { channel: 'alpha', content: 'alpha mail' } }));
    const b = await must(rt.run({ op: 'send', sid: 'sess_beta1', args: { channel: 'beta', content: 'beta mail' } }));
    const id = b.data.message_ids[0] as string;
    await w.waitFor(envelopeLine(id, 'pending'));
    await must(
      rt.run({
        op: 'delete_session',
        actor: { operator: true, project_id: 'cli-local-project', worktree: dir },
        args: { channel: 'beta', confirm: true },
        archive: null,
      }),
    );
    await w.waitFor(envelopeLine(id, 'discarded'));
    expect(w.lines.map(json).every((l) => l.kind !== 'process' && l.channel === 'beta')).toBe(true);
  });

  it('on a broken project (schema 3) exits 1 with the reason', async () => {
    await incompatibleState(dir);
    const r = await cli('watch', '--project', dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain('schema_version 3');
  });

  it('--channel naming no channel yet says so on its ready line; a saved one is refused lifecycle_refused', async () => {
    const w = await watch('--channel', 'nosuch');
    expect(w.stderr()).toContain('(channel nosuch, which does not exist yet: its lines start when it is created;');
    const op = { operator: true as const, project_id: 'cli-local-project', worktree: dir };
    await must(rt.run({ op: 'create_session', actor: op, args: { channel: 'old' } }));
    await must(rt.run({ op: 'save_session', actor: op, args: { channel: 'old', summary: 'Old.' } }));
    const r = await cli('watch', '--channel', 'old', '--project', dir, '--json');
    expect(r.code).toBe(1);
    expect(r.err).toBe('');
    expect(r.json()).toMatchObject({ ok: false, data: { reason: 'lifecycle_refused', lifecycle: 'saved' } });
  });

  it('refuses a malformed channel name (exit 1)', async () => {
    const p = start([BIN, 'watch', '--channel', 'Not A Name', '--project', dir]);
    procs.push(p);
    expect(await p.exited).toBe(1);
    expect(p.stderr()).toContain('is not a channel name');
  });
});
