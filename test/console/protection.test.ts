// The console's protections (FEATURES.md §10.1, CON-4): loopback binding, a spoofed Host → 403,
// a cross-site write → 403, both recorded in state.errors; a body over 1,000,000 chars → 413;
// an unknown route → 404 naming method and path; a fault → 500 without a stack trace.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { forbidden, isLoopbackHost } from '../../src/console/guard.ts';
import { MAX_BODY_CHARS } from '../../src/console/limits.ts';
import { startConsole } from '../../src/console/server.ts';
import { openRuntime } from '../../src/runtime/runtime.ts';
import { useConsole } from './fixtures.ts';

const c = useConsole();

const errors = async () => {
  const rt = openRuntime(c.dir);
  const s = await rt.read();
  await rt.close();
  return s.errors;
};

describe('CON-4 Host check (DNS rebinding)', () => {
  it('answers loopback names on any port; any other Host is a 403, recorded', async () => {
    for (const host of ['127.0.0.1', 'localhost:4919', `127.0.0.1:${c.server.port}`, '[::1]:80', 'LOCALHOST'])
      expect((await c.req('GET', '/api/channels', { headers: { host } })).status, host).toBe(200);
    for (const host of [
      'evil.example',
      'evil.example:4919',
      '127.0.0.1.evil.example',
      'localhost.evil.example',
      '10.0.0.5',
      '[::2]:4919',
    ]) {
      const r = await c.req('GET', '/api/channels', { headers: { host } });
      expect(r.status, host).toBe(403);
      expect(r.json).toMatchObject({ ok: false, message: expect.stringContaining('Forbidden: Host header') });
    }
    const logged = (await errors()).filter((e) => e.reason === 'console_forbidden');
    expect(logged).toHaveLength(6);
    expect(logged[0]!.message).toBe(
      'Console refused GET /api/channels: Host header "evil.example" is not 127.0.0.1, localhost or [::1].',
    );
  });
});

describe('CON-4 cross-site writes (CSRF)', () => {
  it('a write from another site is a 403 and changes nothing; loopback origins and same-origin fetches pass', async () => {
    const refused: Record<string, string>[] = [
      { origin: 'https://evil.example' },
      { origin: 'null' },
      { referer: 'https://evil.example/page' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site', origin: 'http://127.0.0.1.evil.example' },
    ];
    for (const headers of refused) {
      const r = await c.req('POST', '/api/channels', { body: { name: 'x' }, headers });
      expect(r.status, JSON.stringify(headers)).toBe(403);
    }
    expect((await c.req('DELETE', '/api/channels/x', { headers: { origin: 'https://evil.example' } })).status).toBe(
      403,
    );
    expect((await c.req('GET', '/api/channels')).json.data.live).toEqual([]);
    expect((await errors()).filter((e) => e.reason === 'console_forbidden')).toHaveLength(refused.length + 1);
    expect((await errors()).some((e) => e.message.includes('cross-site POST from origin "https://evil.example"'))).toBe(
      true,
    );

    const allowed: Record<string, string>[] = [
      { origin: `http://127.0.0.1:${c.server.port}` },
      { origin: 'http://localhost:5173', 'sec-fetch-site': 'same-site' },
      { 'sec-fetch-site': 'same-origin', origin: `http://127.0.0.1:${c.server.port}` },
      { 'sec-fetch-site': 'none' },
      {},
    ];
    for (const [i, headers] of allowed.entries())
      expect(
        (await c.req('POST', '/api/channels', { body: { name: `ok${i}` }, headers })).status,
        JSON.stringify(headers),
      ).toBe(200);
    // Reads carry no write risk: another site's GET is answered (the browser keeps the answer from it).
    expect((await c.req('GET', '/api/channels', { headers: { origin: 'https://evil.example' } })).status).toBe(200);
  });

  it('the checks as a pure function', () => {
    expect(isLoopbackHost(undefined)).toBe(false);
    expect(forbidden({ method: 'PATCH', hostHeader: 'localhost', origin: 'https://evil.example' })).toMatch(
      /cross-site PATCH/,
    );
    expect(forbidden({ method: 'PUT', hostHeader: 'localhost', referer: 'http://[::1]:9/x' })).toBeNull();
    expect(forbidden({ method: 'GET', hostHeader: 'localhost', origin: 'https://evil.example' })).toBeNull();
  });
});

describe('bodies, unknown routes, faults', () => {
  it('a body over 1,000,000 chars is a 413; exactly that many is read', async () => {
    const big = await c.req('POST', '/api/channels', { raw: `"${'x'.repeat(MAX_BODY_CHARS)}"` });
    expect(big.status).toBe(413);
    expect(big.json.message).toBe('Request body over 1000000 characters.');
    // Counted in characters, not bytes: 1,000,000 three-byte characters still fit.
    const atCap = await c.req('POST', '/api/channels', {
      raw: JSON.stringify({ name: 'cap', pad: '€'.repeat(MAX_BODY_CHARS - 30) }),
    });
    expect(atCap.status).toBe(200);
    const bad = await c.req('POST', '/api/channels', { raw: '{not json' });
    expect(bad).toMatchObject({ status: 400, json: { ok: false, data: { reason: 'invalid_argument' } } });
    expect((await c.req('POST', '/api/channels', { raw: '[1,2]' })).status).toBe(400);
  });

  it('an unknown route is a 404 naming method and path', async () => {
    const r = await c.req('GET', '/api/nope');
    expect(r).toMatchObject({
      status: 404,
      json: { ok: false, message: 'No route for GET /api/nope.', data: { method: 'GET', path: '/api/nope' } },
    });
    const wrong = await c.req('PUT', '/api/channels');
    expect(wrong.status).toBe(404);
    expect(wrong.json.message).toBe('No route for PUT /api/channels. That path exists for another method.');
    expect((await c.req('GET', '/api/channels/%E0%A4%A/members')).status).toBe(404);
    expect((await c.req('POST', '/')).json.message).toBe('No route for POST /.');
  });

  it('a fault is a 500 with no stack trace; what happened goes to state.errors', async () => {
    // An archives "directory" that is a file: listing it fails with ENOTDIR, an unexpected fault.
    await mkdir(join(c.dir, '.opencomms'), { recursive: true });
    await writeFile(join(c.dir, '.opencomms', 'archives'), 'not a directory');
    const r = await c.req('GET', '/api/channels');
    expect(r.status).toBe(500);
    expect(r.json).toMatchObject({ ok: false, data: { reason: 'internal_error' } });
    expect(r.text).not.toMatch(/ENOTDIR|at .*\.ts:\d+|\n\s+at /);
    // Recorded once, by the runtime, with what failed (the caller's answer carries no details).
    const recorded = (await errors()).filter((e) => e.reason === 'internal_error');
    expect(recorded).toHaveLength(1);
    expect(recorded[0]!.message).toMatch(/^Internal error in session_list: .*ENOTDIR/);
  });
});

describe('a broken project', () => {
  it('answers every read with the state refusal (400, data.reason), never a 500', async () => {
    await mkdir(join(c.dir, '.opencomms'), { recursive: true });
    await writeFile(join(c.dir, '.opencomms', 'state.json'), JSON.stringify({ schema_version: 3 }));
    for (const path of [
      '/api/channels',
      '/api/channels/x/members',
      '/api/channels/x/deliveries',
      '/api/channels/x/join-command',
    ]) {
      const r = await c.req('GET', path);
      expect(r.status, path).toBe(400);
      expect(r.json.data.reason).toBe('state_incompatible');
    }
    expect((await c.req('POST', '/api/channels', { body: { name: 'x' } })).json.data.reason).toBe('state_incompatible');
  });
});

describe('binding', () => {
  it('listens on loopback only; a busy port is an error', async () => {
    expect(c.server.url).toBe(`http://127.0.0.1:${c.server.port}/`);
    await expect(startConsole({ project: c.dir, port: c.server.port, log: () => {} })).rejects.toMatchObject({
      code: 'EADDRINUSE',
    });
  });
});
