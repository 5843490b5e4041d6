import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Child-process heavy suites (crash points, kill tests) share 2 cores; keep a few workers.
    maxWorkers: 2,
  },
});
