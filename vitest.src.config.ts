import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * `npm run test:src`: the tests that need no build, run straight from src/ (no `npm run
 * build`, no dist/). A test needs dist/ when it runs the compiled library: it names a path
 * under dist/, or takes from test/helpers what runs it (cli.ts's CLI, CRASH_CLI and
 * cliProcess, the built CLI as a process; dist.ts and crash.ts). That is read from each
 * file, so a new test is sorted by what it does, not by a list; one that needs dist/ and
 * slips through fails loudly (requireDist, or the missing file named), never passes.
 */
const TEST_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'test');
const RUNS_BUILT = /\b(CLI|CRASH_CLI|cliProcess)\b/;

export function needsDist(text: string): boolean {
  if (/['"`][^'"`]*\bdist\//.test(text)) return true;
  for (const m of text.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*'[^']*helpers\/(cli|dist|crash)\.js'/g)) {
    if (m[2] !== 'cli' || RUNS_BUILT.test(m[1]!)) return true;
  }
  return false;
}

export const BUILT_TESTS = (fs.readdirSync(TEST_DIR, { recursive: true }) as string[])
  .filter((f) => f.endsWith('.test.ts') && needsDist(fs.readFileSync(path.join(TEST_DIR, f), 'utf8')))
  .map((f) => `test/${f}`)
  .sort();

export default mergeConfig(base, defineConfig({ test: { exclude: BUILT_TESTS } }));
