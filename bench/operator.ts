// Operator reads under load: `opencomms watch` on a burst, and the console's and the CLI's session
// reads on a project with 10,000 pending over 30 channels × 8 members and 120 saved channels
// (~100 MB of archives). Each figure beside its target, one JSON line each.
import { main } from '../src/cli/main.ts';
import { startConsole } from '../src/console/server.ts';
import { newChannelId, newCorrelationId, newMessageId } from '../src/protocol/ids.ts';
import type { Envelope, Member } from '../src/protocol/schema.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { FileStore, resolvePaths, writeArchive } from '../src/store/index.ts';
import { BIN, start } from '../test/helpers/process.ts';
import { caller, emit, now, round, stats, withProject } from './lib.ts';

const CHANNELS = 30;
const MEMBERS = 8;
const PENDING = 10_000;
const ARCHIVES = 120;
/** Messages per archive and their size: 120 archives of ~0.8 MB, ~100 MB in all. */
const ARCHIVE_MESSAGES = 400;
const ARCHIVE_CONTENT = 1600;
const BURST = 3000;
/** Timed rounds per read figure, after READ_WARM untimed. */
const READ_ROUNDS = 20;
const READ_WARM = 3;

const envelope = (
  channel_id: string,
  i: number,
  t0: number,
  from: string,
  to: string,
  content: string,
  delivered = false,
): Envelope => ({
  message_id: newMessageId(),
  channel_id,
  sender_session_id: from,
  sender_role: 'M0',
  recipient_session_id: to,
  recipient_role: 'M1',
  timestamp: t0 + i,
  message_type: 'manual',
  content,
  reply_to: null,
  hop_count: 0,
  correlation_id: newCorrelationId(),
  root_message_id: null,
  delivery_status: delivered ? 'delivered' : 'pending',
  delivered_at: delivered ? t0 + i + 1 : null,
  attempts: delivered ? 1 : 0,
  delivery_method: delivered ? 'pull' : null,
  in_flight_by: null,
  in_flight_at: null,
  transitions: delivered
    ? [
        ['SEND', 'pending', t0 + i],
        ['PULL', 'delivered', t0 + i + 1],
      ]
    : [['SEND', 'pending', t0 + i]],
});

const must = async (p: Promise<{ ok: boolean; message: string }>) => {
  const r = await p;
  if (!r.ok) throw new Error(r.message);
};

/** `n` pending envelopes queued in one mutation, spread over `targets` ([channel id, sender, recipient]). */
async function queue(rt: Runtime, n: number, targets: Array<[string, string, string]>) {
  const t0 = Date.now();
  return rt.store.mutate((d) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const [ch, from, to] = targets[i % targets.length]!;
      const e = envelope(ch, i, t0, from, to, `pending ${i}`.padEnd(200, '.'));
      d.messages[e.message_id] = e;
      (d.queues[to] ??= []).push(e.message_id);
      ids.push(e.message_id);
    }
    return { changed: true, result: ids };
  });
}

/** 30 channels × 8 pull members, 10,000 pending among them, 120 archives of ~0.8 MB. */
async function loadedProject(dir: string) {
  const rt = new Runtime(new FileStore(dir));
  const targets: Array<[string, string, string]> = [];
  for (let c = 0; c < CHANNELS; c++) {
    for (let m = 0; m < MEMBERS; m++) {
      const args = { channel: `ops-${c}`, role: `M${m}`, role_prompt: 'work' };
      await must(
        rt.run(
          m === 0
            ? { op: 'create', caller: caller(dir, `c${c}m${m}`), args }
            : { op: 'join', caller: caller(dir, `c${c}m${m}`), args },
        ),
      );
    }
  }
  const state = await rt.read();
  for (let c = 0; c < CHANNELS; c++)
    for (let m = 1; m < MEMBERS; m++) targets.push([state.channels[`ops-${c}`]!.id, `c${c}m0`, `c${c}m${m}`]);
  await queue(rt, PENDING, targets);
  const members: Member[] = state.channels['ops-0']!.members;
  const t0 = Date.now() - 10_000_000;
  const content = 'x'.repeat(ARCHIVE_CONTENT);
  for (let a = 0; a < ARCHIVES; a++) {
    const id = newChannelId();
    const messages = Array.from({ length: ARCHIVE_MESSAGES }, (_, i) =>
      envelope(id, i, t0, members[0]!.session_id, members[1]!.session_id, content, true),
    );
    await writeArchive(resolvePaths(dir), {
      schema: 1,
      channel_id: id,
      name: `saved-${a}`,
      parent_channel_id: null,
      description: `Saved session ${a}`,
      summary: `Session ${a}.`,
      members,
      created_at: t0,
      saved_at: t0 + a,
      saved_by: null,
      saved_by_role: null,
      message_count: ARCHIVE_MESSAGES,
      messages,
      final_state_note: content.slice(0, 200),
    });
  }
  await rt.close();
}

async function timed(fn: () => Promise<void>): Promise<ReturnType<typeof stats>> {
  for (let i = 0; i < READ_WARM; i++) await fn();
  const xs: number[] = [];
  for (let i = 0; i < READ_ROUNDS; i++) {
    const t = now();
    await fn();
    xs.push(now() - t);
  }
  return stats(xs);
}

/** The CLI command as the binary runs it (a fresh runtime and store), in this process:
 *  the figure leaves out Node's start and module loading, which no project size changes. */
const cliRun =
  (dir: string, ...argv: string[]) =>
  async () => {
    let err = '';
    const code = await main([...argv, '--project', dir, '--json'], { out: () => {}, err: (t) => void (err += t) });
    if (code !== 0) throw new Error(`${argv.join(' ')}: ${err}`);
  };

async function readsBench() {
  await withProject(async (dir) => {
    await loadedProject(dir);
    const shape = {
      pending: PENDING,
      channels: CHANNELS,
      members_per_channel: MEMBERS,
      archives: ARCHIVES,
      target: 'p50 <= 100',
    };
    const server = await startConsole({ project: dir, port: 0, log: () => {} });
    try {
      const api = await timed(async () => {
        const r = await fetch(`${server.url}api/channels`);
        if (r.status !== 200) throw new Error(`GET /api/channels: ${r.status}`);
        await r.arrayBuffer();
      });
      emit('console_api_channels', { unit: 'ms', ...api, ...shape, what: 'GET /api/channels on a running console' });
    } finally {
      await server.close();
    }
    // What a fresh process pays to load this state whole: a CLI channel read pays it only when
    // the channel-reads index (sessions.json) does not describe the files (then it writes the index again).
    const load = await timed(async () => {
      const store = new FileStore(dir);
      await store.peek();
      await store.close();
    });
    emit('cli_state_load_floor', {
      unit: 'ms',
      ...load,
      ...shape,
      target: 'reported',
      what: "a fresh FileStore's first peek of this state (snapshot + journal, validated): a CLI channel read's cost when its index is missing or stale",
    });
    emit('cli_channel_list', {
      unit: 'ms',
      ...(await timed(cliRun(dir, 'channel', 'list'))),
      ...shape,
      what: 'channel list --json in process: channel-reads index, engine, render; no Node start',
    });
    emit('cli_channel_get', {
      unit: 'ms',
      ...(await timed(cliRun(dir, 'channel', 'get', `saved-${ARCHIVES / 2}`))),
      ...shape,
      what: 'channel get <a saved channel> --json in process; no Node start',
    });
  });
}

/** A watch process, then 3,000 pending pulled in pulls of 100: how long after the last pull
 *  returned the watch printed the last of the 3,000 delivered lines. */
async function watchBench() {
  await withProject(async (dir) => {
    const rt = new Runtime(new FileStore(dir));
    await must(
      rt.run({
        op: 'create',
        caller: caller(dir, 'w0', 'push'),
        args: { channel: 'burst', role: 'A', role_prompt: 'send' },
      }),
    );
    await must(
      rt.run({ op: 'join', caller: caller(dir, 'w1'), args: { channel: 'burst', role: 'R', role_prompt: 'read' } }),
    );
    const ch = (await rt.read()).channels.burst!.id;
    const ids = new Set(await queue(rt, BURST, [[ch, 'w0', 'w1']]));
    const p = start([BIN, 'watch', '--json', '--project', dir]);
    try {
      await new Promise<void>((resolve) => {
        const t = setInterval(() => {
          if (!p.stderr().includes('Ctrl-C stops')) return;
          clearInterval(t);
          resolve();
        }, 10);
      });
      let lastAt = 0;
      let seen = 0;
      const done = new Promise<void>((resolve) => {
        p.child.stdout!.on('data', () => {
          for (; seen < p.lines.length; seen++) {
            const l = JSON.parse(p.lines[seen]!) as { kind: string; message_id?: string; to: string };
            if (l.kind === 'envelope' && l.to === 'delivered' && ids.delete(l.message_id!)) lastAt = now();
          }
          if (ids.size === 0) resolve();
        });
      });
      const t0 = now();
      for (let got = 0; got < BURST; ) {
        const r = await rt.run({ op: 'pull', sid: 'w1', args: { limit: 100 } });
        got += (r.data as { message_ids: string[] }).message_ids.length;
      }
      const burstEnd = now();
      await done;
      emit('watch_burst_last_line', {
        unit: 'ms',
        value: round(lastAt - burstEnd, 1),
        burst: BURST,
        burst_ms: round(burstEnd - t0, 1),
        what: 'last delivered line printed by `opencomms watch --json`, after the last of 30 pulls of 100 returned',
        target: '<= 1000',
      });
    } finally {
      await p.stop('SIGTERM');
      await rt.close();
    }
  });
}

export async function operatorBench() {
  await watchBench();
  await readsBench();
}
