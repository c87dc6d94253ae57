// The scale bench's wake floor (bench/scale.ts): the least a waiter can do to see a floor send
// (bench/floor-server.ts) addressed to its member and hand it over. A bare Node process: on the file
// store it watches the floor's one append-only file (fs.watch) and reads only what was appended since
// its cursor; on PostgreSQL it LISTENs on its member's own channel (the floor table's trigger
// notifies each recipient) and reads the rows past its cursor. It first reads what came while no
// waiter ran (to stdout: what ours' Stop hook hands over at the turn's end), then waits; when it
// finds mail for its member it writes `cursor <n>` and the message ids to stderr and exits 2, as the
// Claude Code waiter does.
// A floor message's content is `to:,<member>,<member>,|<message id>|<text>`.
//   node scale-floor-waiter.mjs file <member> <cursor> <file>
//   node scale-floor-waiter.mjs pg <member> <cursor> <table> <channel>   (OPENCOMMS_FLOOR_DATABASE_URL)
import { fstatSync, openSync, readSync, watch, writeSync } from 'node:fs';
import pg from 'pg';

const [mode, me, start, where, channel] = process.argv.slice(2) as [string, string, string, string, string];
const mark = `,${me},`;

/** The first look hands over what came while no waiter ran (on stdout, as a Stop hook's context:
 *  no new turn); a later one that finds mail wakes: the ids to stderr, exit 2. */
let first = true;
function handOver(cursor: number, ids: string[]) {
  if (first) {
    first = false;
    if (ids.length) writeSync(1, `${ids.join('\n')}\n`);
    return;
  }
  if (!ids.length) return;
  writeSync(2, `cursor ${cursor}\n${ids.join('\n')}\n`);
  process.exit(2);
}

/** The message id of a floor content addressed to this member, or null. */
function mine(content: string): string | null {
  if (!content.startsWith('to:')) return null;
  const [to, id] = content.slice(3).split('|', 2);
  return to!.includes(mark) ? id! : null;
}

if (mode === 'file') {
  let cursor = Number(start);
  const fd = openSync(where, 'r');
  const look = () => {
    const size = fstatSync(fd).size;
    if (size <= cursor) return;
    const buf = Buffer.alloc(size - cursor);
    readSync(fd, buf, 0, buf.length, cursor);
    const end = buf.lastIndexOf(0x0a) + 1; // whole lines only
    const ids: string[] = [];
    for (const line of buf.subarray(0, end).toString('utf8').split('\n'))
      if (line) {
        const id = mine((JSON.parse(line) as { content: string }).content);
        if (id) ids.push(id);
      }
    cursor += end;
    handOver(cursor, ids);
  };
  watch(where, look);
  look();
} else {
  let cursor = Number(start);
  const db = new pg.Client(process.env.OPENCOMMS_FLOOR_DATABASE_URL);
  await db.connect();
  let looking = Promise.resolve();
  const look = () =>
    (looking = looking.then(async () => {
      const r = await db.query<{ n: string; content: string }>({
        name: 'look',
        text: `select n, body->>'content' as content from ${where} where n > $1 and channel = $2 order by n`,
        values: [cursor, channel],
      });
      const ids: string[] = [];
      for (const row of r.rows) {
        cursor = Math.max(cursor, Number(row.n));
        const id = mine(row.content);
        if (id) ids.push(id);
      }
      handOver(cursor, ids);
    }));
  db.on('notification', () => void look());
  await db.query(`listen "ocf_${me}"`);
  await look();
}
