import type { AllowedSkip } from './skip-check.js';

/**
 * The tests that may be skipped in CI (`CI=true`, as `.ci/run` sets it), each with its
 * reason. Any other skipped test fails the run there (test/helpers/skip-check.ts): a guard
 * such as `it.skipIf(!tool)` is for a developer's machine, where a tool or a mount may be
 * missing; CI installs every tool of scripts/test-setup.sh and runs as root, so a skip
 * there means a test that silently stopped running. Keep this list short; CONTRIBUTING.md
 * ("Skipped tests") says when an entry belongs here.
 *
 * `file` is the test file's path from the repository's root, `test` the test's full name
 * (its describe blocks and its own name joined with " > ").
 */
export const ALLOWED_SKIPS: readonly AllowedSkip[] = [];
