// The spawning harness itself: loopback-only namespace, port relays, scrubbed env, timeouts.
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { describeRun, makeSandbox, run, start, waitHttp } from './env.ts';
import type { Sandbox } from './env.ts';
import { startFakeAnthropic } from './fake/index.ts';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const sandbox = (): Sandbox => {
  const sb = makeSandbox('env');
  cleanups.push(() => sb.cleanup());
  return sb;
};
const node = process.execPath;
/** A node one-liner that tries a TCP connect to 127.0.0.1:port and prints `open` or the error code. */
const probe = (port: number) => [
  '-e',
  `require('net').connect(${port},'127.0.0.1').on('connect',()=>{console.log('open');process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(0)})`,
];

describe('run() under unshare -n', () => {
  it('sees only a loopback interface, which is up', async () => {
    const sb = sandbox();
    const r = await run('ip', ['-o', 'link', 'show'], { cwd: sb.proj, env: sb.env, timeoutMs: 10_000 });
    expect(r.code, describeRun(r)).toBe(0);
    const links = r.stdout.trim().split('\n');
    expect(links, r.stdout).toHaveLength(1);
    expect(links[0]).toMatch(/^1: lo: <LOOPBACK,UP/);
  });

  it('reaches a forwarded host port, and no other host port', async () => {
    const sb = sandbox();
    const fake = await startFakeAnthropic();
    cleanups.push(() => fake.close());
    const other = net.createServer((c) => c.end());
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => other.close(r)));
    const otherPort = (other.address() as AddressInfo).port;

    const fwd = await run(node, ['-e', `fetch('${fake.url}/v1/x').then(r=>console.log(r.status))`], {
      cwd: sb.proj,
      env: sb.env,
      timeoutMs: 10_000,
      forward: [fake.port],
    });
    expect(fwd.stdout.trim(), describeRun(fwd)).toBe('404');
    expect(fake.requests.map((r) => r.url)).toEqual(['/v1/x']);

    const blocked = await run(node, probe(otherPort), {
      cwd: sb.proj,
      env: sb.env,
      timeoutMs: 10_000,
      forward: [fake.port],
    });
    expect(blocked.stdout.trim(), describeRun(blocked)).toBe('ECONNREFUSED');
    const host = await run(node, probe(otherPort), { cwd: sb.proj, env: sb.env, timeoutMs: 10_000, hostNetwork: true });
    expect(host.stdout.trim(), describeRun(host)).toBe('open');
  });

  it('exposes a server started inside the namespace to the test', async () => {
    const sb = sandbox();
    const p = await start(
      node,
      ['-e', `require('http').createServer((q,s)=>s.end('inside')).listen(4321,'127.0.0.1')`],
      { cwd: sb.proj, env: sb.env, timeoutMs: 20_000, expose: [4321] },
    );
    cleanups.push(() => p.stop());
    const url = `http://127.0.0.1:${p.ports.get(4321)}/`;
    await waitHttp(url, 10_000);
    expect(await (await fetch(url)).text()).toBe('inside');
    const r = await p.stop();
    expect(r.timedOut).toBe(false);
  });

  it('passes only the given environment', async () => {
    const sb = sandbox();
    process.env.OCR_LEAK_CHECK = 'leaked';
    try {
      const r = await run('env', [], { cwd: sb.proj, env: { ...sb.env, EXTRA: '1' }, timeoutMs: 10_000 });
      const names = r.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('=')[0])
        .sort();
      expect(names).toEqual([...Object.keys(sb.env), 'EXTRA'].sort());
      expect(r.stdout).toContain(`HOME=${sb.home}\n`);
    } finally {
      delete process.env.OCR_LEAK_CHECK;
    }
  });

  it('kills the whole process group on timeout', async () => {
    const sb = sandbox();
    const t0 = performance.now();
    const p = await start('bash', ['-c', 'sleep 30 & sleep 30'], { cwd: sb.proj, env: sb.env, timeoutMs: 500 });
    const r = await p.done;
    expect(r.timedOut).toBe(true);
    expect(r.signal).toBe('SIGKILL');
    expect(performance.now() - t0).toBeLessThan(5000);
    // No live process of the group is left (zombies waiting for their reaper do not count).
    const live = () =>
      readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          try {
            const f = readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ');
            return Number(f[2]) === p.child.pid && f[0] !== 'Z';
          } catch {
            return false;
          }
        });
    for (let i = 0; i < 20 && live().length; i++) await new Promise((r) => setTimeout(r, 100));
    expect(live()).toEqual([]);
  });
});
