import * as path from 'node:path';
import { execaSync } from 'execa';

/**
 * Before any test: every Debian tool of scripts/test-setup.sh is installed, or the run stops
 * naming the missing packages (a missing tool never surfaces as a spawn ENOENT in some test).
 * `npm test` has already installed them as root; a bare `npx vitest` lands here.
 */
export default function setup(): void {
  const script = path.resolve(import.meta.dirname, '../../scripts/test-setup.sh');
  const r = execaSync('bash', [script, '--check'], { reject: false });
  if (r.exitCode !== 0) {
    throw new Error(`${r.stderr.trim()}\nRun scripts/test-setup.sh as root (npm test does) to install them.`);
  }
}
