/**
 * `npm run test:quick` leaves out only what vitest.quick.config.ts lists, each an existing
 * test file (a renamed sweep would otherwise slip into the quick tier), and sets up and
 * builds as `npm test` does.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect, it } from 'vitest';
import quick, { SLOW } from '../../vitest.quick.config.js';

const root = path.resolve(import.meta.dirname, '../..');

it('leaves out existing test files only, and keeps the rest of the suite', () => {
  expect(SLOW.length).toBeGreaterThan(5);
  expect(SLOW.filter((f) => !fs.existsSync(path.join(root, f)))).toEqual([]);
  expect(quick.test?.exclude).toEqual(SLOW);
  expect(quick.test?.include).toEqual(['test/**/*.test.ts']);
});

it('runs the set-up script and the build first, as npm test does', () => {
  const scripts = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).scripts as Record<string, string>;
  expect(scripts['test:quick']).toBe('bash scripts/test-setup.sh && npm run build && vitest run --config vitest.quick.config.ts');
  expect(scripts.test!.startsWith('bash scripts/test-setup.sh && npm run build && ')).toBe(true);
});
