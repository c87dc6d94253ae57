// Config of the real-client suite (run from the repo root: see README.md). No imports, so the
// root `tsc -p .` checks it without test/real/node_modules being installed.
import { fileURLToPath } from 'node:url';

export default {
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**'],
    testTimeout: 90_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // The clients are heavy (2 cores here): one test file at a time.
    fileParallelism: false,
  },
};
