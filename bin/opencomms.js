#!/usr/bin/env node
// Runs the bundled CLI (dist/, built by `npm run build`, which `npm ci` runs as `prepare`);
// without a build it runs the TypeScript sources through tsx's loader. `mcp` goes straight to the
// self-contained server bundle: hosts start one per session, and it loads nothing else.
import { existsSync } from 'node:fs';

const args = process.argv.slice(2);
const mcpBundle = new URL('../dist/opencomms-mcp.mjs', import.meta.url);
const dist = new URL('../dist/opencomms.mjs', import.meta.url);
if (args[0] === 'mcp' && existsSync(mcpBundle)) {
  const { mcpMain } = await import(mcpBundle.href);
  process.exitCode = await mcpMain(args.slice(1));
} else {
  let main;
  if (existsSync(dist)) ({ main } = await import(dist.href));
  else {
    const { register } = await import('tsx/esm/api');
    register();
    ({ main } = await import('../src/cli/main.ts'));
  }
  process.exitCode = await main(args);
}
