import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/real/**', 'test/browser/**', 'test/netns/**', 'test/pg-faults/**'],
    testTimeout: 30_000,
    pool: 'forks',
    // A real PostgreSQL for the store contract suite (the machine's, or one started from npm).
    globalSetup: ['test/helpers/pg-global-setup.ts'],
  },
});
