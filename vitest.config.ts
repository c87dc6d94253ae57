import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/real/**', 'test/browser/**'],
    testTimeout: 30_000,
    pool: 'forks',
  },
});
