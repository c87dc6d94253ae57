import { defineConfig } from 'vitest/config';

// PostgreSQL servers of the tests' own on file systems they mount (root only): `npm run test:pg-faults`.
export default defineConfig({
  test: {
    include: ['test/pg-faults/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
