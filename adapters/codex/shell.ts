// One argument of a hook command line. Codex runs a hook's `command` through the platform shell
// (`sh -c` on POSIX), so paths with spaces or quotes must be quoted for that shell.
const PLAIN = /^[A-Za-z0-9_/.:=@%+,-]+$/;

export function shellQuote(arg: string, platform: NodeJS.Platform = process.platform): string {
  if (PLAIN.test(arg)) return arg;
  if (platform === 'win32') return `"${arg.replace(/"/g, '""')}"`;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}
