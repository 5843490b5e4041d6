import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Stops the run naming the missing Debian packages before any test (scripts/test-setup.sh).
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Child-process heavy suites (crash points, kill tests) share 2 cores; keep a few workers.
    maxWorkers: 2,
  },
});
