// `opencomms serve` / `gui` as processes (FEATURES.md §9): the console on a loopback port, a busy
// port or a non-loopback bind → exit 1, a port out of range → exit 1, Ctrl-C → exit 0.
import { createServer } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BIN, start, type Proc } from '../helpers/process.ts';
import { send } from '../console/fixtures.ts';
import { cli } from './fixtures.ts';

let dir: string;
const procs: Proc[] = [];
beforeEach(async () => void (dir = await mkdtemp(join(tmpdir(), 'oc-serve-'))));
afterEach(async () => {
  for (const p of procs.splice(0)) await p.stop('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

/** A port nobody listens on right now (the OS picks it). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

const run = (...args: string[]) => {
  const p = start([BIN, ...args, '--project', dir]);
  procs.push(p);
  return p;
};

describe('opencomms serve / gui', () => {
  it('serves the console on 127.0.0.1 until Ctrl-C; a second one on the same port exits 1', async () => {
    const port = await freePort();
    const p = run('serve', '--port', String(port));
    const line = await p.waitFor((l) => l.startsWith('OpenComms console:'));
    expect(line).toBe(`OpenComms console: http://127.0.0.1:${port}/ (project ${dir}); Ctrl-C stops.`);
    expect((await send(port, 'GET', '/api/channels')).json).toMatchObject({ ok: true, data: { live: [] } });
    const busy = run('gui', '--no-open', '--port', String(port));
    expect(await busy.exited).toBe(1);
    expect(busy.stderr()).toContain(`port ${port} on 127.0.0.1 is in use; pass --port <another>`);
    expect(await p.stop('SIGINT')).toBe(0);
  });

  it('gui --server binds ::1 when asked and does not open a browser', async () => {
    const port = await freePort();
    const p = run('gui', '--server', '--bind', '::1', '--port', String(port));
    expect(await p.waitFor((l) => l.startsWith('OpenComms console:'))).toContain(`http://[::1]:${port}/`);
    expect(await p.stop('SIGTERM')).toBe(0);
  });

  it('refuses a non-loopback bind and a port out of range (exit 1) before listening', async () => {
    const bind = await cli('serve', '--bind', '0.0.0.0', '--project', dir);
    expect(bind).toMatchObject({ code: 1, out: '' });
    expect(bind.err).toContain(
      'refusing to listen on "0.0.0.0": the console binds loopback only (127.0.0.1, localhost, ::1)',
    );
    for (const port of ['0', '65536', 'http']) {
      const r = await cli('gui', '--no-open', '--port', port, '--project', dir);
      expect(r.code).toBe(1);
      expect(r.err).toContain('--port must be a whole number from 1 to 65535');
    }
  });
});
