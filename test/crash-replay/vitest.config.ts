import { defineConfig } from 'vitest/config';

// The crash replay's checks: run by run.mjs (`npm run test:crash-replay`), one filesystem
// (replay.check.ts) or the ESP (esp.check.ts) per run, never by the main suite (its include
// pattern is test/**/*.test.ts).
export default defineConfig({
  test: {
    include: ['test/crash-replay/replay.check.ts', 'test/crash-replay/esp.check.ts'],
    testTimeout: 24 * 3600_000,
    maxWorkers: 1,
  },
});
