/**
 * The compiled library (dist/), for the tests that run it: in child processes, or on worker
 * threads. This module loads nothing of src/, so that a test of dist/ holds one instance of
 * each module.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const DIST_INDEX = path.join(here, '..', '..', 'dist', 'index.js');

/** The child processes run the compiled library: fail loudly when it is missing or older than src/. */
export function requireDist(): void {
  const built = fs.statSync(DIST_INDEX, { throwIfNoEntry: false });
  if (!built) throw new Error(`${DIST_INDEX} is missing: run \`npm run build\` first (\`npm test\` does)`);
  const src = path.join(here, '..', '..', 'src');
  const newer = (fs.readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts') && fs.statSync(path.join(src, f)).mtimeMs > built.mtimeMs);
  if (newer.length > 0) throw new Error(`dist/ is older than src/ (${newer.slice(0, 3).join(', ')}): run \`npm run build\` first (\`npm test\` does)`);
}
