// Runs inside a fresh network namespace (`unshare -n -- node netns-exec.mjs SPEC -- cmd args…`):
// brings up loopback, relays TCP ports across the namespace boundary through Unix sockets (which
// are files, so both namespaces see them), then runs the command and exits with its status.
// SPEC is JSON: { forward: [{port, sock}], expose: [{port, sock}] }
//   forward: 127.0.0.1:port inside  -> Unix socket sock (served outside, relayed to the host's port)
//   expose:  Unix socket sock        -> 127.0.0.1:port inside (for a server the command runs)
import { execFileSync, spawn } from 'node:child_process';
import net from 'node:net';

const sep = process.argv.indexOf('--');
const spec = JSON.parse(process.argv[2]);
const [cmd, ...args] = process.argv.slice(sep + 1);

// The relays carry HTTP. When the far side cannot be reached (the server is not listening yet),
// the client gets a 502 at once: a bare close or reset before any response byte makes Node 20's
// fetch hang until its own timeout.
const BAD_GATEWAY = 'HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n';
const pipe = (c, o) => {
  let connected = false;
  o.once('connect', () => {
    connected = true;
  });
  o.on('error', () => c.end(connected ? undefined : BAD_GATEWAY));
  o.on('close', () => c.end());
  c.on('error', () => o.destroy());
  c.on('close', () => o.end());
  c.pipe(o);
  o.pipe(c);
};
const listen = (server, ...where) =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(...where, resolve);
  });

try {
  execFileSync('ip', ['link', 'set', 'lo', 'up'], { stdio: ['ignore', 'ignore', 'inherit'] });
} catch (e) {
  console.error(`netns-exec: cannot bring up loopback with \`ip link set lo up\`: ${e.message}`);
  process.exit(125);
}
for (const { port, sock } of spec.forward ?? []) {
  await listen(
    net.createServer((c) => pipe(c, net.connect(sock))),
    port,
    '127.0.0.1',
  );
}
for (const { port, sock } of spec.expose ?? []) {
  await listen(
    net.createServer((c) => pipe(c, net.connect(port, '127.0.0.1'))),
    sock,
  );
}
const child = spawn(cmd, args, { stdio: 'inherit' });
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => child.kill(sig));
child.on('error', (e) => {
  console.error(`netns-exec: cannot run ${cmd}: ${e.message}`);
  process.exit(127);
});
child.on('exit', (code, signal) =>
  process.exit(code ?? 128 + (signal ? ({ SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGHUP: 1 }[signal] ?? 1) : 1)),
);
