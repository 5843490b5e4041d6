import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * `npm run test:quick`: the edit-test loop's tier, under 2 minutes on a 2-core machine.
 * The same tests as `npm test` but the slow ones, named `*.slow.test.ts`: each a sweep, a
 * stress or a measurement that `npm test` (the whole suite, what CI runs) keeps — crash-point
 * sweeps, kill and concurrency runs, memory measurements, randomized properties over
 * hundreds of cases, the lint run, the set-up script run in fresh roots. A new test joins
 * the quick tier unless its name says it is slow. No VM test is in either tier
 * (test/real-boot and test/crash-replay have their own commands).
 */
export const SLOW = '**/*.slow.test.ts';

export default mergeConfig(base, defineConfig({ test: { exclude: [SLOW] } }));
