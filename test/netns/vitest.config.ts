import { defineConfig } from 'vitest/config';

// Machines as Linux network namespaces (root only): `npm run test:machines`.
export default defineConfig({
  test: {
    include: ['test/netns/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: false,
    globalSetup: ['test/helpers/pg-global-setup.ts'],
  },
});
