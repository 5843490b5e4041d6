import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * `npm run test:quick`: the edit-test loop's tier, under 2 minutes on a 2-core machine.
 * The same tests as `npm test` but those below, each a sweep, a stress or a measurement
 * that `npm test` (the whole suite, what CI runs) keeps: no crash-point sweeps, no kill or
 * concurrency runs, no memory measurements, no randomized properties over hundreds of
 * cases, no lint run (`npm run lint` is its own command). No VM test is in either tier
 * (test/real-boot and test/crash-replay have their own commands).
 */
export const SLOW = [
  'test/crash-points.test.ts', // every crash point of every operation, each in a child process
  'test/reliability/kill.test.ts', // SIGKILL at random points until each operation was hit
  'test/reliability/concurrency.test.ts', // eight writer processes on one sysroot
  'test/store/prune-kept.test.ts', // a crash at every point of prune
  'test/install/adopt.test.ts', // adopt killed at a spread of points, then resumed
  'test/fs/lock/writer-lock.test.ts', // lock holders SIGKILLed, a writer killed while breaking a stale lock
  'test/testing/faults.test.ts', // the crash CLI SIGKILLed by its fault hook
  'test/sources/oci-image-memory.test.ts', // peak RSS of a big image
  'test/sources/tar/layer-source-memory.test.ts', // peak RSS of a big layer
  'test/stage/dry-run-property.test.ts', // 142 sources, dry-run against the stage
  'test/merge/type-conflicts.test.ts', // 250 random merges against the full planner
  'test/lint/layers.test.ts', // eslint over all of src/, several times
  'test/scripts/test-setup.test.ts', // the set-up script run in fresh roots
];

export default mergeConfig(base, defineConfig({ test: { exclude: SLOW } }));
