// Browser tests of the console (`npm run test:browser`): real Chromium (Debian's `chromium`
// package) driven by playwright-core. No imports, so the root `tsc -p .` checks it as is.
import { fileURLToPath } from 'node:url';

export default {
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // One browser on 2 cores: one file at a time.
    fileParallelism: false,
  },
};
