import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/real/**'],
    testTimeout: 30_000,
    pool: 'forks',
  },
});
