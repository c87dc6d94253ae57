#!/usr/bin/env node
// Runs the bundled CLI (dist/, built by `npm run build`, which `npm ci` runs as `prepare`);
// without a build it runs the TypeScript sources through tsx's loader.
import { existsSync } from 'node:fs';

const dist = new URL('../dist/opencomms.mjs', import.meta.url);
let main;
if (existsSync(dist)) ({ main } = await import(dist.href));
else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
process.exitCode = await main(process.argv.slice(2));
