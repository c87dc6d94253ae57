// One simple query over PostgreSQL's wire protocol (v3) on a fresh connection, with Node built-ins
// only: the hook runner's glance at a bound project, which must not pay for loading a full client
// (`pg` costs Node more to load than the hook's own work). Plain TCP or a Unix socket, with trust,
// cleartext, MD5 or SCRAM-SHA-256 authentication; anything else rejects, and the caller takes
// the full path, which uses the store's client. The connection ends with the answer: a short-lived
// process holds none afterwards.
import { crypto } from '../../lazy-crypto.ts';

export interface WireTarget {
  host?: string;
  port: number;
  /** A Unix socket directory (PostgreSQL's `.s.PGSQL.<port>` in it) instead of TCP. */
  socketDir?: string;
  user: string;
  database: string;
  password?: string;
}

const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const message = (type: string, body: Buffer) => Buffer.concat([Buffer.from(type), int32(body.length + 4), body]);
const cstr = (s: string) => Buffer.from(`${s}\0`);

/** The rows of `sql` as text (null for SQL NULL); rejects on any error, timeout or unsupported step.
 *  `node:net` is loaded here, not with the module: the hook runner that imports this answers a
 *  project on the file store without it (net loads the stream modules, a few ms of every prompt). */
export async function simpleQuery(t: WireTarget, sql: string, timeoutMs: number): Promise<(string | null)[][]> {
  const { createConnection } = await import('node:net');
  return new Promise((resolve, reject) => {
    const sock = t.socketDir
      ? createConnection({ path: `${t.socketDir}/.s.PGSQL.${t.port}` })
      : createConnection({ host: t.host, port: t.port, noDelay: true });
    const rows: (string | null)[][] = [];
    let buf: Buffer = Buffer.alloc(0);
    // With no password to give, the server can only let the session in (trust, peer) or refuse it:
    // the query goes with the start-up message and runs as soon as the session is ready, without a
    // round trip back here. With a password, it follows the first ReadyForQuery.
    const pipelined = t.password === undefined;
    let ready = 0;
    let scram: Scram | null = null;
    const fail = (why: string) => {
      sock.destroy();
      reject(new Error(why));
    };
    sock.setTimeout(timeoutMs, () => fail('timeout'));
    sock.on('error', (e) => fail(e.message));
    sock.on('connect', () => {
      const params = Buffer.concat([
        int32(196608),
        cstr('user'),
        cstr(t.user),
        cstr('database'),
        cstr(t.database),
        cstr('application_name'),
        cstr('opencomms-hook'),
        Buffer.from([0]),
      ]);
      const startup = Buffer.concat([int32(params.length + 4), params]);
      sock.write(pipelined ? Buffer.concat([startup, message('Q', cstr(sql))]) : startup);
    });
    sock.on('data', (d: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      while (buf.length >= 5) {
        const len = buf.readInt32BE(1);
        if (buf.length < len + 1) return;
        const type = String.fromCharCode(buf[0]!);
        const body = buf.subarray(5, len + 1);
        buf = buf.subarray(len + 1);
        if (type === 'E') return fail(`server error ${errorCode(body)}`);
        if (type === 'R') {
          const step = authStep(t, body, scram);
          if (step === null) return fail('unsupported authentication');
          scram = step.scram;
          if (step.reply) sock.write(step.reply);
        } else if (type === 'D') rows.push(dataRow(body));
        else if (type === 'Z' && ++ready === 1) {
          if (!pipelined) sock.write(message('Q', cstr(sql)));
        } else if (type === 'Z') {
          // The Terminate is written (a pending write holds the process); the server's side of the
          // close is not waited for.
          sock.end(message('X', Buffer.alloc(0)));
          sock.unref();
          resolve(rows);
        }
      }
    });
  });
}

function dataRow(body: Buffer): (string | null)[] {
  const n = body.readInt16BE(0);
  const out: (string | null)[] = [];
  let at = 2;
  for (let i = 0; i < n; i++) {
    const len = body.readInt32BE(at);
    at += 4;
    if (len < 0) out.push(null);
    else {
      out.push(body.toString('utf8', at, at + len));
      at += len;
    }
  }
  return out;
}

function errorCode(body: Buffer): string {
  for (let at = 0; at < body.length && body[at] !== 0; ) {
    const end = body.indexOf(0, at + 1);
    if (body[at] === 0x43) return body.toString('utf8', at + 1, end); // 'C': SQLSTATE
    at = end + 1;
  }
  return 'unknown';
}

interface Scram {
  nonce: string;
  bare: string;
  serverKey?: Buffer;
  signature?: string;
}

/** The answer to one authentication message, or null when it cannot be given. */
function authStep(t: WireTarget, body: Buffer, scram: Scram | null): { reply?: Buffer; scram: Scram | null } | null {
  const code = body.readInt32BE(0);
  if (code === 0) return { scram };
  if (t.password === undefined) return null;
  if (code === 3) return { reply: message('p', cstr(t.password)), scram };
  if (code === 5) {
    const md5 = (x: Buffer | string) => crypto().createHash('md5').update(x).digest('hex');
    const inner = md5(t.password + t.user);
    return { reply: message('p', cstr(`md5${md5(Buffer.concat([Buffer.from(inner), body.subarray(4, 8)]))}`)), scram };
  }
  if (code === 10) {
    if (!body.subarray(4).toString().split('\0').includes('SCRAM-SHA-256')) return null;
    const nonce = crypto().randomBytes(18).toString('base64');
    const bare = `n=*,r=${nonce}`;
    const first = Buffer.from(`n,,${bare}`);
    const payload = Buffer.concat([cstr('SCRAM-SHA-256'), int32(first.length), first]);
    return { reply: message('p', payload), scram: { nonce, bare } };
  }
  if (code === 11 && scram) return scramFinal(t.password, body.subarray(4).toString(), scram);
  if (code === 12 && scram) {
    const v = /v=([^,]+)/.exec(body.subarray(4).toString())?.[1];
    return v === scram.signature ? { scram } : null;
  }
  return null;
}

/** SCRAM-SHA-256's client-final message (RFC 5802), and the server signature to expect. */
export function scramFinal(password: string, serverFirst: string, s: Scram): { reply: Buffer; scram: Scram } | null {
  const attrs = Object.fromEntries(serverFirst.split(',').map((kv) => [kv[0], kv.slice(2)]));
  const nonce = attrs.r;
  const salt = attrs.s;
  const iterations = Number(attrs.i);
  if (!nonce?.startsWith(s.nonce) || !salt || !Number.isInteger(iterations)) return null;
  const { createHash, createHmac, pbkdf2Sync } = crypto();
  const hmac = (key: Buffer, text: string) => createHmac('sha256', key).update(text).digest();
  const salted = pbkdf2Sync(password.normalize('NFKC'), Buffer.from(salt, 'base64'), iterations, 32, 'sha256');
  const clientKey = hmac(salted, 'Client Key');
  const storedKey = createHash('sha256').update(clientKey).digest();
  const withoutProof = `c=biws,r=${nonce}`;
  const auth = `${s.bare},${serverFirst},${withoutProof}`;
  const signature = hmac(storedKey, auth);
  const proof = Buffer.from(clientKey.map((b, i) => b ^ signature[i]!)).toString('base64');
  const serverSig = hmac(hmac(salted, 'Server Key'), auth).toString('base64');
  return {
    reply: message('p', Buffer.from(`${withoutProof},p=${proof}`)),
    scram: { ...s, signature: serverSig },
  };
}
