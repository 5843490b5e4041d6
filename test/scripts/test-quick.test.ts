/**
 * `npm run test:quick` leaves out the slow tests, by their name (`*.slow.test.ts`), and
 * keeps the rest of the suite; `npm test` runs them all; both set up and build first.
 * The files each tier runs are those vitest itself lists for its config.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execa } from 'execa';
import { expect, it } from 'vitest';
import quick, { SLOW } from '../../vitest.quick.config.js';

const root = path.resolve(import.meta.dirname, '../..');

/** The test files vitest runs with a config (`vitest list --filesOnly`), from the root. */
async function files(config: string): Promise<string[]> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST')));
  const r = await execa(path.join(root, 'node_modules/.bin/vitest'), ['list', '--filesOnly', '--config', config], { cwd: root, env: { ...env, NO_COLOR: '1' }, extendEnv: false });
  return r.stdout.split('\n').filter((l) => l.endsWith('.test.ts')).map((l) => path.relative(root, path.resolve(root, l.trim()))).sort();
}

it('leaves out the *.slow.test.ts files, and only those; npm test runs every file', async () => {
  expect(quick.test?.exclude).toEqual([SLOW]);
  expect(quick.test?.include).toEqual(['test/**/*.test.ts']);
  const [all, quickFiles] = await Promise.all([files('vitest.config.ts'), files('vitest.quick.config.ts')]);
  const slow = all.filter((f) => f.endsWith('.slow.test.ts'));
  expect(slow.length).toBeGreaterThan(5);
  expect(slow).toContain('test/crash-points.slow.test.ts');
  expect(quickFiles).toEqual(all.filter((f) => !f.endsWith('.slow.test.ts')));
  expect(quickFiles).toContain('test/sysroot.test.ts');
});

it('runs the set-up script and the build first, as npm test does', () => {
  const scripts = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).scripts as Record<string, string>;
  expect(scripts['test:quick']).toBe('bash scripts/test-setup.sh && npm run build && vitest run --config vitest.quick.config.ts');
  expect(scripts.test).toBe('bash scripts/test-setup.sh && npm run build && vitest run');
});
