import * as path from 'node:path';
import { execaSync } from 'execa';
import type { TestProject } from 'vitest/node';
import { ALLOWED_SKIPS } from './allowed-skips.js';
import { skipCheck } from './skip-check.js';

/**
 * Before any test: every Debian tool of scripts/test-setup.sh is installed, or the run stops
 * naming the missing packages (a missing tool never surfaces as a spawn ENOENT in some test).
 * `npm test` has already installed them as root; a bare `npx vitest` lands here.
 * After the last test, in CI: no test was skipped but those of test/helpers/allowed-skips.ts.
 */
export default function setup(project: TestProject): () => void {
  const script = path.resolve(import.meta.dirname, '../../scripts/test-setup.sh');
  const r = execaSync('bash', [script, '--check'], { reject: false });
  if (r.exitCode !== 0) {
    throw new Error(`${r.stderr.trim()}\nRun scripts/test-setup.sh as root (npm test does) to install them.`);
  }
  return skipCheck(ALLOWED_SKIPS)(project);
}
